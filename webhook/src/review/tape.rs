//! A value serialized to compact JSON together with a record of where each object member lies
//! in the bytes, taken while serde_json writes them (a [`Formatter`] that notes the positions
//! of keys and values). The defaulting patch compares two such records member by member, so
//! neither document is parsed back, no JSON tree is built and equal members are skipped as
//! equal bytes.

use std::cell::Cell;
use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, Serializer};

/// A byte range of the JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

/// One member of a JSON object.
#[derive(Clone, Copy, Debug)]
struct Member {
    /// The key, quotes included (escaped as serde_json writes it).
    key: Span,
    /// The value.
    value: Span,
    /// The object the value is, if it is one.
    object: Option<usize>,
    /// The next member of the same object.
    next: Option<usize>,
}

/// The first and last member of an object.
#[derive(Clone, Copy, Debug, Default)]
struct Object {
    first: Option<usize>,
    last: Option<usize>,
}

/// Compact JSON and its member record. Object 0 is the value itself when it is an object.
#[derive(Debug)]
pub struct Tape {
    json: String,
    members: Vec<Member>,
    objects: Vec<Object>,
}

/// A member as the patch sees it: its key (the JSON string's contents, still escaped), its
/// value's JSON, and the object that value is, if it is one.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'t> {
    /// The key's escaped contents.
    pub key: &'t str,
    /// The value, as JSON.
    pub value: &'t str,
    /// The object the value is, if it is one.
    pub object: Option<usize>,
}

impl Tape {
    /// Serializes `value`, recording its members.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Tape> {
        let pos = Cell::new(0);
        let mut record = Record {
            pos: &pos,
            // Room for a defaulted Example Nova (70 members in 30 objects) and more, so that
            // recording grows nothing.
            members: Vec::with_capacity(256),
            objects: Vec::with_capacity(64),
            open_objects: Vec::with_capacity(8),
            open_members: Vec::with_capacity(8),
        };
        let writer = Counted {
            out: Vec::with_capacity(4096),
            pos: &pos,
        };
        let mut ser = Serializer::with_formatter(writer, &mut record);
        value.serialize(&mut ser)?;
        // serde_json writes UTF-8; checked once here, so every member's text is a slice.
        let json = String::from_utf8(ser.into_inner().out).map_err(serde::ser::Error::custom)?;
        Ok(Tape {
            json,
            members: record.members,
            objects: record.objects,
        })
    }

    /// The whole JSON.
    pub fn json(&self) -> &str {
        self.text(Span {
            start: 0,
            end: self.json.len(),
        })
    }

    /// The members of `object`, in the order they were written.
    pub fn entries(&self, object: usize) -> impl Iterator<Item = Entry<'_>> {
        let first = self.objects.get(object).and_then(|o| o.first);
        std::iter::successors(first.map(|i| self.members[i]), |m| {
            m.next.map(|i| self.members[i])
        })
        .map(|m| Entry {
            key: self.text(Span {
                start: m.key.start + 1,
                end: m.key.end - 1,
            }),
            value: self.text(m.value),
            object: m.object,
        })
    }

    /// Whether the value is an object (so that object 0 is it).
    pub fn is_object(&self) -> bool {
        self.json.starts_with('{')
    }

    fn text(&self, span: Span) -> &str {
        // Every span starts and ends at a token boundary, so on a character boundary.
        self.json.get(span.start..span.end).unwrap_or_default()
    }
}

/// The output buffer, publishing its length to the formatter after every write.
struct Counted<'p> {
    out: Vec<u8>,
    pos: &'p Cell<usize>,
}

impl io::Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        self.pos.set(self.out.len());
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        // Most writes are one byte (a quote, colon, comma or brace): pushed without the
        // general copy.
        match buf {
            [byte] => self.out.push(*byte),
            _ => self.out.extend_from_slice(buf),
        }
        self.pos.set(self.out.len());
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The compact formatter, noting where each object member's key and value start and end.
struct Record<'p> {
    pos: &'p Cell<usize>,
    members: Vec<Member>,
    objects: Vec<Object>,
    /// The objects being written, innermost last.
    open_objects: Vec<usize>,
    /// The members being written, innermost last.
    open_members: Vec<usize>,
}

impl Record<'_> {
    fn open_member(&mut self) -> Option<&mut Member> {
        let i = *self.open_members.last()?;
        self.members.get_mut(i)
    }
}

impl Formatter for &mut Record<'_> {
    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        let id = self.objects.len();
        let at = self.pos.get();
        // An object that starts where the open member's value starts is that value (one
        // inside an array starts later), so the patch can descend into it.
        if let Some(member) = self.open_member().filter(|m| m.value.start == at) {
            member.object = Some(id);
        }
        self.objects.push(Object::default());
        self.open_objects.push(id);
        CompactFormatter.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open_objects.pop();
        CompactFormatter.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        CompactFormatter.begin_object_key(writer, first)?;
        let id = self.members.len();
        let at = self.pos.get();
        self.members.push(Member {
            key: Span { start: at, end: at },
            value: Span::default(),
            object: None,
            next: None,
        });
        self.open_members.push(id);
        if let Some(&parent) = self.open_objects.last() {
            let object = &mut self.objects[parent];
            match object.last {
                Some(last) => self.members[last].next = Some(id),
                None => object.first = Some(id),
            }
            object.last = Some(id);
        }
        Ok(())
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.end_object_key(writer)?;
        let at = self.pos.get();
        if let Some(member) = self.open_member() {
            member.key.end = at;
        }
        Ok(())
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.begin_object_value(writer)?;
        let at = self.pos.get();
        if let Some(member) = self.open_member() {
            member.value = Span { start: at, end: at };
        }
        Ok(())
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.end_object_value(writer)?;
        let at = self.pos.get();
        if let Some(member) = self.open_member() {
            member.value.end = at;
        }
        self.open_members.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries(tape: &Tape, object: usize) -> Vec<(&str, &str, Option<usize>)> {
        tape.entries(object)
            .map(|e| (e.key, e.value, e.object))
            .collect()
    }

    #[test]
    fn members_are_recorded_per_object_with_their_bytes() {
        let value = json!({"a": {"b": 1, "c": [{"d": 2}], "e": {}}, "f\"g": "x/y~z", "h": null});
        let tape = Tape::of(&value).unwrap();
        assert_eq!(tape.json(), serde_json::to_string(&value).unwrap());
        assert!(tape.is_object());
        let root = entries(&tape, 0);
        assert_eq!(
            root,
            vec![
                ("a", r#"{"b":1,"c":[{"d":2}],"e":{}}"#, Some(1)),
                (r#"f\"g"#, r#""x/y~z""#, None),
                ("h", "null", None),
            ]
        );
        // The object inside the array is no member's value.
        let a = entries(&tape, 1);
        assert_eq!(
            a,
            vec![
                ("b", "1", None),
                ("c", r#"[{"d":2}]"#, None),
                ("e", "{}", Some(3)),
            ]
        );
        assert!(entries(&tape, 3).is_empty());
    }

    #[test]
    fn a_scalar_has_no_members() {
        let tape = Tape::of(&json!([1, {"a": 2}])).unwrap();
        assert!(!tape.is_object());
        assert_eq!(tape.json(), r#"[1,{"a":2}]"#);
    }
}
