// `#[replicated(n)]` takes one option, `unchecked`.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[replicated(3, unchekced)]
struct SiteConfig {
    #[key]
    name: KeyName,
    banner: String,
}

fn main() {
    let _ = SiteConfig::key(KeyName::new("site").unwrap());
}
