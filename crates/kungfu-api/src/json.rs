//! Serialization helpers for the generated messages (the CLI's `--json`). The generated types
//! derive `serde::Serialize` (see `build.rs`); these write an enum field, which prost keeps as an
//! `i32`, by its variant name, and Content by its size only.

use serde::Serializer;

/// An enum field as its variant name (`Speaker`), or its number when this build does not know it.
pub fn enum_name<E, S>(value: &i32, s: S) -> Result<S::Ok, S::Error>
where
    E: TryFrom<i32> + std::fmt::Debug,
    S: Serializer,
{
    match E::try_from(*value) {
        Ok(e) => s.serialize_str(&format!("{e:?}")),
        Err(_) => s.serialize_i32(*value),
    }
}

/// An optional enum field: its variant name, or null.
pub fn optional_enum_name<E, S>(value: &Option<i32>, s: S) -> Result<S::Ok, S::Error>
where
    E: TryFrom<i32> + std::fmt::Debug,
    S: Serializer,
{
    match value {
        Some(v) => enum_name::<E, S>(v, s),
        None => s.serialize_none(),
    }
}

/// A repeated enum field: the variant names.
pub fn enum_names<E, S>(values: &[i32], s: S) -> Result<S::Ok, S::Error>
where
    E: TryFrom<i32> + std::fmt::Debug,
    S: Serializer,
{
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(values.len()))?;
    for v in values {
        match E::try_from(*v) {
            Ok(e) => seq.serialize_element(&format!("{e:?}"))?,
            Err(_) => seq.serialize_element(v)?,
        }
    }
    seq.end()
}

/// Content as `{"bytes": N}`: participant content is never structure (L6); commands that show it
/// add it explicitly as text.
impl serde::Serialize for crate::pb::Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("bytes", &self.body.len())?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use crate::pb;

    #[derive(serde::Serialize)]
    struct Fields {
        #[serde(serialize_with = "super::enum_name::<pb::Role, _>")]
        role: i32,
        #[serde(serialize_with = "super::enum_name::<pb::Role, _>")]
        unknown: i32,
        #[serde(serialize_with = "super::optional_enum_name::<pb::Role, _>")]
        some: Option<i32>,
        #[serde(serialize_with = "super::optional_enum_name::<pb::Role, _>")]
        none: Option<i32>,
        #[serde(serialize_with = "super::enum_names::<pb::Role, _>")]
        many: Vec<i32>,
        content: pb::Content,
    }

    #[test]
    fn enums_are_named_and_content_is_only_its_size() {
        let v = serde_json::to_value(Fields {
            role: pb::Role::Speaker as i32,
            unknown: 999,
            some: Some(pb::Role::Governor as i32),
            none: None,
            many: vec![pb::Role::Observer as i32, 998],
            content: pb::Content { body: b"secret".to_vec() },
        })
        .expect("json");
        assert_eq!(
            v,
            serde_json::json!({
                "role": "Speaker", "unknown": 999, "some": "Governor", "none": null,
                "many": ["Observer", 998], "content": {"bytes": 6}
            })
        );
    }
}
