//! The generated code uses absolute paths only: it compiles in a module that shadows the
//! prelude's names, with every warning (missing docs included) denied.
#![deny(warnings, missing_docs)]

/// Shadows everything the generated code must not pick up by accident.
pub mod shadowed {
    #![allow(dead_code, non_camel_case_types)]
    /// Shadow.
    pub struct Option;
    /// Shadow.
    pub struct Result;
    /// Shadow.
    pub struct Vec;
    /// Shadow.
    pub struct Box;
    /// Shadow.
    pub struct Some;
    /// Shadow.
    pub struct None;
    /// Shadow.
    pub struct Ok;
    /// Shadow.
    pub struct Err;
    /// Shadow.
    pub struct String;
    /// Shadow.
    pub struct Into;

    use datastore_entity::{Entity, Key, KeyId, KeyName, Timestamp};

    /// An account.
    #[derive(Entity)]
    #[entity(kind = "Account", rename_all = "camelCase")]
    pub struct Account {
        /// Key.
        #[key]
        pub name: KeyName,
        /// Email.
        pub email_address: ::std::string::String,
        /// Bio.
        #[exclude_from_index]
        pub bio: ::std::option::Option<::std::string::String>,
        /// Expiry.
        #[ttl]
        pub expires: ::std::option::Option<Timestamp>,
        /// Avatar.
        #[blob]
        pub avatar: ::std::vec::Vec<u8>,
        /// Address.
        pub home: ::std::option::Option<Address>,
    }

    /// An embedded address.
    #[derive(Entity)]
    pub struct Address {
        /// City.
        pub city: ::std::string::String,
        /// Tags.
        pub tags: ::std::vec::Vec<::std::string::String>,
    }

    /// A post under an account, with every generated helper.
    #[derive(Entity)]
    #[entity(
        projection(PostCard: title, state, tags),
        index(title, -score),
        ancestor_index(-when)
    )]
    pub struct Post {
        /// Parent.
        #[parent]
        pub account: Key<Account>,
        /// Id.
        #[key]
        pub id: ::std::option::Option<KeyId>,
        /// Title.
        pub title: ::std::string::String,
        /// Tags.
        pub tags: ::std::vec::Vec<::std::string::String>,
        /// Boxed.
        pub score: ::std::boxed::Box<i64>,
        /// State.
        pub state: State,
        /// Rank.
        pub rank: Rank,
        /// Likes.
        #[sharded(3)]
        pub likes: i64,
        /// When.
        #[sharded_index(4)]
        pub when: Timestamp,
        /// Edited.
        #[index(monotonic)]
        pub edited: ::std::option::Option<Timestamp>,
    }

    /// A state, stored as a string.
    #[derive(datastore_entity::PropertyValue, Clone, Copy, Debug, PartialEq)]
    #[property(rename_all = "snake_case")]
    pub enum State {
        /// Open.
        Open,
        /// Closed.
        #[property(rename = "done")]
        Closed,
    }

    /// A rank, stored as its integer.
    #[derive(datastore_entity::PropertyValue)]
    pub struct Rank(pub i64);

    /// Replicated settings.
    #[derive(Entity)]
    #[replicated(3)]
    pub struct Settings {
        /// Key.
        #[key]
        pub name: KeyName,
        /// A field named like the key builder.
        pub key: ::std::string::String,
    }

    /// A private entity with a private key builder.
    #[derive(Entity)]
    struct Private {
        #[key]
        id: u64,
    }

    /// Uses the private entity so it is not dead code.
    pub fn private_key() -> ::std::option::Option<i64> {
        Private::key(datastore_entity::key_id!(3)).id().map(KeyId::get)
    }
}

fn main() {
    use datastore_entity::Entity;
    let account = shadowed::Account::key(datastore_entity::key_name!("ann"));
    let post = shadowed::Post::incomplete_key(&account);
    assert_eq!(post.parent().as_ref(), Some(account.raw()));
    assert_eq!(<shadowed::Account as Entity>::KIND, "Account");
    assert_eq!(shadowed::Account::EMAIL_ADDRESS.name(), "emailAddress");
    assert_eq!(shadowed::private_key(), Some(3));
    assert_eq!(shadowed::Settings::KEY.name(), "key");
    let card = shadowed::PostCard {
        title: "t".into(),
        state: shadowed::State::Closed,
        tags: "rust".into(),
    };
    assert_eq!(card.clone(), card);
    let db = datastore_entity::Db::in_memory();
    let _ = shadowed::Post::query_by_when(&db).desc();
    let _ = shadowed::Post::increment_likes(&db, &post, 1);
    let _ = shadowed::Post::likes_total(&db, &post);
}
