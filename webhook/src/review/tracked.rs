//! A typed decode that records, as it reads, the members of the JSON objects it passes
//! through: the defaulting patch asks which members the received spec had (`add` or
//! `replace`, and whether a path exists at all) without reading the spec a second time.
//!
//! [`Tracked`] wraps the decoder handed to the type (a serde `Deserializer` that forwards every
//! call and notes each object's member names), so the type decodes exactly as it would from
//! the JSON text. Objects inside arrays and enum variants are not noted: no member path of a
//! patch goes through them.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

/// The member names of the objects a decode read, borrowed from the document unless they carry
/// escapes. Objects are numbered in the order they were entered; the decoded value is
/// [`Members::ROOT`].
pub struct Members<'de> {
    entries: Vec<Entry<'de>>,
    objects: u32,
}

/// One member: the object it belongs to, its name, and the object its value is (if it is one).
struct Entry<'de> {
    object: u32,
    key: Cow<'de, str>,
    child: Option<u32>,
}

impl<'de> Members<'de> {
    /// The decoded value itself.
    pub const ROOT: u32 = 0;

    /// The object that member `key` of `object` holds; `None` when the member is absent or its
    /// value is not an object. The last member of that name counts, as a decoder reading the
    /// object keeps the last of duplicate members.
    pub fn object(&self, object: u32, key: &str) -> Option<u32> {
        self.last(object, key)?.child
    }

    /// Whether `object` has a member `key` (of any value, null included).
    pub fn has(&self, object: u32, key: &str) -> bool {
        self.last(object, key).is_some()
    }

    fn last(&self, object: u32, key: &str) -> Option<&Entry<'de>> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.object == object && e.key == key)
    }
}

/// A JSON object decoded as `T`, with the members of every object read on the way.
pub struct Tracked<'de, T> {
    /// The decoded value, boxed: a spec is kilobytes, and the review holding it is moved.
    pub value: Box<T>,
    /// The members the JSON had.
    pub members: Members<'de>,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tracked<'de, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut members = Members {
            entries: Vec::with_capacity(128),
            objects: 0,
        };
        let value = Box::new(T::deserialize(Value {
            de: d,
            members: &mut members,
            parent: None,
        })?);
        // A struct also decodes from an array (serde's sequence form), where no member path
        // exists for a patch to address.
        if members.objects == 0 {
            return Err(de::Error::custom("expected a JSON object"));
        }
        Ok(Tracked { value, members })
    }
}

/// Forwards every `deserialize_*` method to the wrapped decoder, the visitor wrapped by `split`.
macro_rules! forward_deserializer {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[inline(always)]
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* v: V) -> Result<V::Value, Self::Error> {
                let (de, v) = self.split(v);
                de.$method($($arg,)* v)
            }
        )*
    };
}

macro_rules! deserializer_methods {
    () => {
        forward_deserializer! {
            deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16();
            deserialize_i32(); deserialize_i64(); deserialize_i128(); deserialize_u8();
            deserialize_u16(); deserialize_u32(); deserialize_u64(); deserialize_u128();
            deserialize_f32(); deserialize_f64(); deserialize_char(); deserialize_str();
            deserialize_string(); deserialize_bytes(); deserialize_byte_buf();
            deserialize_option(); deserialize_unit(); deserialize_seq(); deserialize_map();
            deserialize_identifier(); deserialize_ignored_any();
            deserialize_unit_struct(name: &'static str);
            deserialize_newtype_struct(name: &'static str);
            deserialize_tuple(len: usize);
            deserialize_tuple_struct(name: &'static str, len: usize);
            deserialize_struct(name: &'static str, fields: &'static [&'static str]);
            deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        }
    };
}

/// Forwards `visit_*` methods of one argument to the wrapped visitor.
macro_rules! forward_visits {
    ($($method:ident: $ty:ty;)*) => {
        $(
            fn $method<E: de::Error>(self, x: $ty) -> Result<Self::Value, E> {
                self.v.$method(x)
            }
        )*
    };
}

macro_rules! scalar_visits {
    () => {
        forward_visits! {
            visit_bool: bool; visit_i8: i8; visit_i16: i16; visit_i32: i32; visit_i64: i64;
            visit_i128: i128; visit_u8: u8; visit_u16: u16; visit_u32: u32; visit_u64: u64;
            visit_u128: u128; visit_f32: f32; visit_f64: f64; visit_char: char;
            visit_bytes: &[u8]; visit_borrowed_bytes: &'de [u8]; visit_byte_buf: Vec<u8>;
        }
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.v.expecting(f)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            self.v.visit_none()
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            self.v.visit_unit()
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            self.v.visit_seq(seq)
        }
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
            self.v.visit_enum(data)
        }
    };
}

/// A value being decoded; `parent` is the member (an index into the entries) it is the value of.
struct Value<'r, 'de, D> {
    de: D,
    members: &'r mut Members<'de>,
    parent: Option<usize>,
}

impl<'r, 'de, D> Value<'r, 'de, D> {
    #[inline(always)]
    fn split<V>(self, v: V) -> (D, Visit<'r, 'de, V>) {
        let visit = Visit {
            v,
            members: self.members,
            parent: self.parent,
        };
        (self.de, visit)
    }
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Value<'_, 'de, D> {
    type Error = D::Error;
    deserializer_methods!();

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

struct Visit<'r, 'de, V> {
    v: V,
    members: &'r mut Members<'de>,
    parent: Option<usize>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Visit<'_, 'de, V> {
    type Value = V::Value;
    scalar_visits!();
    forward_visits! { visit_str: &str; visit_borrowed_str: &'de str; visit_string: String; }

    #[inline(always)]
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_some(Value {
            de: d,
            members: self.members,
            parent: self.parent,
        })
    }

    #[inline(always)]
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_newtype_struct(Value {
            de: d,
            members: self.members,
            parent: self.parent,
        })
    }

    #[inline(always)]
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let object = self.members.objects;
        self.members.objects += 1;
        if let Some(parent) = self.parent {
            self.members.entries[parent].child = Some(object);
        }
        self.v.visit_map(Map {
            map,
            members: self.members,
            object,
            last: None,
        })
    }
}

/// An object being read: each key is noted, each value decoded as that member's.
struct Map<'r, 'de, A> {
    map: A,
    members: &'r mut Members<'de>,
    object: u32,
    last: Option<usize>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Map<'_, 'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut key = None;
        let found = self.map.next_key_seed(KeySeed {
            seed,
            key: &mut key,
        })?;
        self.last = key.map(|key| {
            self.members.entries.push(Entry {
                object: self.object,
                key,
                child: None,
            });
            self.members.entries.len() - 1
        });
        Ok(found)
    }

    #[inline(always)]
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.map.next_value_seed(ValueSeed {
            seed,
            members: &mut *self.members,
            parent: self.last,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

struct ValueSeed<'r, 'de, S> {
    seed: S,
    members: &'r mut Members<'de>,
    parent: Option<usize>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for ValueSeed<'_, 'de, S> {
    type Value = S::Value;

    #[inline(always)]
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Value {
            de: d,
            members: self.members,
            parent: self.parent,
        })
    }
}

/// A member name being decoded: whatever reads it, the string is noted in `key`.
struct KeySeed<'k, 'de, K> {
    seed: K,
    key: &'k mut Option<Cow<'de, str>>,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, 'de, K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        self.seed.deserialize(KeyDe {
            de: d,
            key: self.key,
        })
    }
}

struct KeyDe<'k, 'de, D> {
    de: D,
    key: &'k mut Option<Cow<'de, str>>,
}

impl<'k, 'de, D> KeyDe<'k, 'de, D> {
    fn split<V>(self, v: V) -> (D, KeyVisit<'k, 'de, V>) {
        (self.de, KeyVisit { v, key: self.key })
    }
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'_, 'de, D> {
    type Error = D::Error;
    deserializer_methods!();

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

struct KeyVisit<'k, 'de, V> {
    v: V,
    key: &'k mut Option<Cow<'de, str>>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisit<'_, 'de, V> {
    type Value = V::Value;
    scalar_visits!();

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        *self.key = Some(Cow::Borrowed(s));
        self.v.visit_borrowed_str(s)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        *self.key = Some(Cow::Owned(s.to_owned()));
        self.v.visit_str(s)
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        *self.key = Some(Cow::Owned(s.clone()));
        self.v.visit_string(s)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_some(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.v.visit_newtype_struct(d)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.v.visit_map(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tracked(json: &str) -> Option<Tracked<'_, serde_json::Value>> {
        serde_json::from_str(json).ok()
    }

    #[test]
    fn members_of_nested_objects_are_noted_and_the_value_decodes_as_from_the_text() {
        let text = r#"{"a":{"b":null,"c":{"d":1}},"e\u0041":[{"f":2}],"g":3,"a":{"h":4}}"#;
        let t = tracked(text).unwrap();
        assert_eq!(
            *t.value,
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        assert_eq!(*t.value, json!({"a": {"h": 4}, "eA": [{"f": 2}], "g": 3}));
        let m = &t.members;
        // The last of two members named `a` counts.
        let a = m.object(Members::ROOT, "a").unwrap();
        assert!(m.has(a, "h") && !m.has(a, "b"));
        assert!(m.has(Members::ROOT, "eA") && m.has(Members::ROOT, "g"));
        // Neither an array nor a number is an object; objects in arrays are not noted.
        assert_eq!(m.object(Members::ROOT, "eA"), None);
        assert_eq!(m.object(Members::ROOT, "g"), None);
        assert_eq!(m.object(Members::ROOT, "x"), None);
    }

    #[test]
    fn only_an_object_is_tracked() {
        assert!(tracked("[1]").is_none());
        assert!(tracked("3").is_none());
        assert!(tracked("{}").is_some());
    }
}
