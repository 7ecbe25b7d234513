//! Typed results (the report model, the c2c report) as Python values, through serde: the
//! serialization `--json` prints, but into dicts, lists, ints, floats, strings and None
//! directly — no JSON text is written or parsed on the way.
//!
//! The values are those `json.loads` gives for serde_json's text of the same value: struct
//! fields in declaration order, tuples as lists, non-finite floats as None, map keys as
//! strings, enums as serde_json writes them. (serde_json's `Value` would sort the fields;
//! pythonize makes tuples Python tuples.)

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::IntoPyObjectExt;
use serde::ser::{self, Serialize};
use std::fmt;

/// `value` as the Python object `json.loads(serde_json::to_string(value))` would give.
pub fn to_python<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    value
        .serialize(PySerializer { py })
        .map(Bound::unbind)
        .map_err(|e| match e {
            Error::Python(e) => e,
            Error::Custom(m) => PyValueError::new_err(m),
        })
}

#[derive(Debug)]
enum Error {
    Python(PyErr),
    Custom(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Python(e) => write!(f, "{e}"),
            Error::Custom(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::Custom(msg.to_string())
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error::Python(e)
    }
}

type Out<'py> = Result<Bound<'py, PyAny>, Error>;

#[derive(Clone, Copy)]
struct PySerializer<'py> {
    py: Python<'py>,
}

impl<'py> PySerializer<'py> {
    fn any<T: IntoPyObjectExt<'py>>(self, v: T) -> Out<'py> {
        Ok(v.into_bound_py_any(self.py)?)
    }
    /// `{variant: value}`, serde_json's form of a variant with content.
    fn tagged(self, variant: &str, value: Bound<'py, PyAny>) -> Out<'py> {
        let d = PyDict::new(self.py);
        d.set_item(variant, value)?;
        Ok(d.into_any())
    }
}

/// A list being filled (sequences, tuples; with a variant name for tuple variants).
struct Seq<'py> {
    ser: PySerializer<'py>,
    list: Bound<'py, PyList>,
    variant: Option<&'static str>,
}

impl<'py> Seq<'py> {
    fn push<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.list.append(v.serialize(self.ser)?)?;
        Ok(())
    }
    fn done(self) -> Out<'py> {
        match self.variant {
            Some(v) => self.ser.tagged(v, self.list.into_any()),
            None => Ok(self.list.into_any()),
        }
    }
}

/// A dict being filled (maps, structs; with a variant name for struct variants).
struct Map<'py> {
    ser: PySerializer<'py>,
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
    variant: Option<&'static str>,
}

impl<'py> Map<'py> {
    fn field<T: ?Sized + Serialize>(&mut self, key: &str, v: &T) -> Result<(), Error> {
        self.dict.set_item(key, v.serialize(self.ser)?)?;
        Ok(())
    }
    fn done(self) -> Out<'py> {
        match self.variant {
            Some(v) => self.ser.tagged(v, self.dict.into_any()),
            None => Ok(self.dict.into_any()),
        }
    }
}

impl<'py> ser::Serializer for PySerializer<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Seq<'py>;
    type SerializeTuple = Seq<'py>;
    type SerializeTupleStruct = Seq<'py>;
    type SerializeTupleVariant = Seq<'py>;
    type SerializeMap = Map<'py>;
    type SerializeStruct = Map<'py>;
    type SerializeStructVariant = Map<'py>;

    fn serialize_bool(self, v: bool) -> Out<'py> {
        self.any(v)
    }
    fn serialize_i8(self, v: i8) -> Out<'py> {
        self.any(v)
    }
    fn serialize_i16(self, v: i16) -> Out<'py> {
        self.any(v)
    }
    fn serialize_i32(self, v: i32) -> Out<'py> {
        self.any(v)
    }
    fn serialize_i64(self, v: i64) -> Out<'py> {
        self.any(v)
    }
    fn serialize_u8(self, v: u8) -> Out<'py> {
        self.any(v)
    }
    fn serialize_u16(self, v: u16) -> Out<'py> {
        self.any(v)
    }
    fn serialize_u32(self, v: u32) -> Out<'py> {
        self.any(v)
    }
    fn serialize_u64(self, v: u64) -> Out<'py> {
        self.any(v)
    }
    fn serialize_f32(self, v: f32) -> Out<'py> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Out<'py> {
        // serde_json writes NaN and the infinities as null.
        if v.is_finite() {
            self.any(v)
        } else {
            self.serialize_none()
        }
    }
    fn serialize_char(self, v: char) -> Out<'py> {
        self.any(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Out<'py> {
        self.any(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Out<'py> {
        // serde_json writes bytes as a list of numbers.
        self.any(v.to_vec())
    }
    fn serialize_none(self) -> Out<'py> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Out<'py> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Out<'py> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Out<'py> {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Out<'py> {
        self.any(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, v: &T) -> Out<'py> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Out<'py> {
        let value = v.serialize(self)?;
        self.tagged(variant, value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'py>, Error> {
        Ok(Seq {
            ser: self,
            list: PyList::empty(self.py),
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'py>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'py>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Seq<'py>, Error> {
        let mut s = self.serialize_seq(Some(len))?;
        s.variant = Some(variant);
        Ok(s)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'py>, Error> {
        Ok(Map {
            ser: self,
            dict: PyDict::new(self.py),
            key: None,
            variant: None,
        })
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Map<'py>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Map<'py>, Error> {
        let mut m = self.serialize_map(Some(len))?;
        m.variant = Some(variant);
        Ok(m)
    }
}

/// The serde traits of [`Seq`] and [`Map`]: each adds an element or a field, and ends.
macro_rules! seq_trait {
    ($($trait:ident::$add:ident),*) => {$(
        impl<'py> ser::$trait for Seq<'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = Error;
            fn $add<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
                self.push(v)
            }
            fn end(self) -> Out<'py> {
                self.done()
            }
        }
    )*};
}

macro_rules! struct_trait {
    ($($trait:ident),*) => {$(
        impl<'py> ser::$trait for Map<'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = Error;
            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), Error> {
                self.field(key, v)
            }
            fn end(self) -> Out<'py> {
                self.done()
            }
        }
    )*};
}

seq_trait!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);
struct_trait!(SerializeStruct, SerializeStructVariant);

impl<'py> ser::SerializeMap for Map<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> Result<(), Error> {
        let key = k.serialize(self.ser)?;
        // JSON object keys are strings: serde_json writes a number key as its digits.
        self.key = Some(if key.is_instance_of::<PyString>() {
            key
        } else {
            key.str()?.into_any()
        });
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| Error::Custom("map value without a key".into()))?;
        self.dict.set_item(key, v.serialize(self.ser)?)?;
        Ok(())
    }
    fn end(self) -> Out<'py> {
        self.done()
    }
}
