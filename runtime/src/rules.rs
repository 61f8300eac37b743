#![doc = include_str!("../docs/rules.md")]
