//! A serde `Serializer` that writes RFC 8785 canonical JSON directly, without building a `serde_json::Value`
//! first. It writes the same bytes as `to_canonical_bytes(&serde_json::to_value(x)?)` for every value (numbers
//! classified as `serde_json::Number` would classify them, non-finite floats as `null`, later duplicate keys
//! winning), at a fraction of the allocations: receipts are hashed on every search.

use serde::ser::{self, Serialize};
use serde_json::Error;

use super::{write_f64, write_string};

/// The largest integer JCS prints as an integer (an IEEE double holds every integer up to it).
const EXACT: u64 = 1 << 53;

/// Writes one JSON value into `out`. `omit` names a key left out of the outermost object only.
pub(super) struct Canonical<'a> {
    pub(super) out: &'a mut Vec<u8>,
    pub(super) omit: Option<&'static str>,
}

impl Canonical<'_> {
    fn integer(self, value: i128) -> Result<(), Error> {
        if value.unsigned_abs() <= u128::from(EXACT) {
            self.out.extend_from_slice(value.to_string().as_bytes());
        } else {
            write_f64(value as f64, self.out);
        }
        Ok(())
    }

    fn float(self, value: f64) -> Result<(), Error> {
        if value.is_finite() {
            write_f64(value, self.out);
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }

    /// `{"variant":` before a variant's content; [`Canonical::close_variant`] writes the `}`.
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        write_string(variant, self.out);
        self.out.push(b':');
    }
}

fn key_error() -> Error {
    ser::Error::custom("key must be a string")
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        self.out.extend_from_slice(if value { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_i128(self, value: i128) -> Result<(), Error> {
        if i64::try_from(value).is_err() && u64::try_from(value).is_err() {
            return Err(ser::Error::custom("number out of range"));
        }
        self.integer(value)
    }
    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        self.integer(i128::from(value))
    }
    fn serialize_u128(self, value: u128) -> Result<(), Error> {
        let value = u64::try_from(value).map_err(|_| ser::Error::custom("number out of range"))?;
        self.integer(i128::from(value))
    }
    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        self.float(f64::from(value))
    }
    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        self.float(value)
    }
    fn serialize_char(self, value: char) -> Result<(), Error> {
        write_string(value.encode_utf8(&mut [0u8; 4]), self.out);
        Ok(())
    }
    fn serialize_str(self, value: &str) -> Result<(), Error> {
        write_string(value, self.out);
        Ok(())
    }
    fn serialize_bytes(self, value: &[u8]) -> Result<(), Error> {
        let mut array = ser::Serializer::serialize_seq(self, Some(value.len()))?;
        for byte in value {
            ser::SerializeSeq::serialize_element(&mut array, byte)?;
        }
        ser::SerializeSeq::end(array)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open_variant(variant);
        value.serialize(Canonical { out: &mut *self.out, omit: None })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'a>, Error> {
        self.out.push(b'[');
        Ok(Array { out: self.out, first: true, variant: false })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Array<'a>, Error> {
        self.open_variant(variant);
        self.out.push(b'[');
        Ok(Array { out: self.out, first: true, variant: true })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, Error> {
        Ok(self.object_owned())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Object<'a>, Error> {
        Ok(self.object_owned())
    }
    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, Error> {
        self.open_variant(variant);
        let mut object = Canonical { out: self.out, omit: None }.object_owned();
        object.variant = true;
        Ok(object)
    }
}

impl<'a> Canonical<'a> {
    fn object_owned(self) -> Object<'a> {
        let start = self.out.len();
        Object { out: self.out, start, entries: Vec::new(), omit: self.omit, pending: None, variant: false }
    }
}

/// An array being written: elements go straight to the output, in order.
pub(super) struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// Inside `{"variant":[...]}`: `end` closes both.
    variant: bool,
}

impl Array<'_> {
    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        value.serialize(Canonical { out: &mut *self.out, omit: None })
    }

    fn close(self) -> Result<(), Error> {
        self.out.push(b']');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

/// The four array-like serde traits differ only in their element method's name.
macro_rules! array_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Array<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

array_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// An object being written. Each member's value is written to the output as it comes, its key and byte range
/// noted; `end` moves the members into key order (UTF-16 code units) and writes the braces, commas and keys.
pub(super) struct Object<'a> {
    out: &'a mut Vec<u8>,
    /// Where the object's bytes begin in `out`.
    start: usize,
    /// Key, and the range of its value's bytes in `out`, in arrival order.
    entries: Vec<(Key, std::ops::Range<usize>)>,
    omit: Option<&'static str>,
    /// A map key waiting for its value.
    pending: Option<Key>,
    /// Inside `{"variant":{...}}`: `end` closes both.
    variant: bool,
}

/// An object key: a field name, or a map key rendered as serde_json renders it.
enum Key {
    Field(&'static str),
    Owned(String),
}

impl Key {
    fn as_str(&self) -> &str {
        match self {
            Key::Field(name) => name,
            Key::Owned(name) => name,
        }
    }
}

impl Object<'_> {
    fn member<T: ?Sized + Serialize>(&mut self, key: Key, value: &T) -> Result<(), Error> {
        if self.omit.is_some_and(|omit| omit == key.as_str()) {
            return Ok(());
        }
        let from = self.out.len();
        value.serialize(Canonical { out: &mut *self.out, omit: None })?;
        self.entries.push((key, from..self.out.len()));
        Ok(())
    }

    fn close(mut self) -> Result<(), Error> {
        let values = self.out.split_off(self.start);
        // A stable sort keeps arrival order among equal keys; the last of them wins, as in a JSON map.
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_by(|(a, _), (b, _)| a.as_str().encode_utf16().cmp(b.as_str().encode_utf16()));
        self.out.push(b'{');
        let mut first = true;
        for (index, (key, range)) in entries.iter().enumerate() {
            if entries.get(index + 1).is_some_and(|(next, _)| next.as_str() == key.as_str()) {
                continue;
            }
            if !std::mem::take(&mut first) {
                self.out.push(b',');
            }
            write_string(key.as_str(), self.out);
            self.out.push(b':');
            self.out.extend_from_slice(&values[range.start - self.start..range.end - self.start]);
        }
        self.out.push(b'}');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        self.pending = Some(Key::Owned(key.serialize(MapKey)?));
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        let key = self.pending.take().ok_or_else(|| ser::Error::custom("a map value without its key"))?;
        self.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// A struct and a struct variant's fields are written alike.
macro_rules! struct_like {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Object<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
                self.member(Key::Field(key), value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

struct_like!(SerializeStruct, SerializeStructVariant);

/// Renders a map key as `serde_json::to_value` does: strings as they are, integers, booleans and chars as
/// their text; anything else is refused.
struct MapKey;

impl ser::Serializer for MapKey {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = ser::Impossible<String, Error>;
    type SerializeTuple = ser::Impossible<String, Error>;
    type SerializeTupleStruct = ser::Impossible<String, Error>;
    type SerializeTupleVariant = ser::Impossible<String, Error>;
    type SerializeMap = ser::Impossible<String, Error>;
    type SerializeStruct = ser::Impossible<String, Error>;
    type SerializeStructVariant = ser::Impossible<String, Error>;

    fn serialize_bool(self, value: bool) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i8(self, value: i8) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i16(self, value: i16) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i32(self, value: i32) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i64(self, value: i64) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i128(self, value: i128) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u8(self, value: u8) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u16(self, value: u16) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u32(self, value: u32) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u64(self, value: u64) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u128(self, value: u128) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_f32(self, _value: f32) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_f64(self, _value: f64) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_char(self, value: char) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_str(self, value: &str) -> Result<String, Error> {
        Ok(value.to_owned())
    }
    fn serialize_bytes(self, _value: &[u8]) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _value: &T) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, Error> {
        Err(key_error())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}
