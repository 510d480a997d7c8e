//! Closed sets of keywords (proposal types, rules, states, tool names...): enums that are
//! stored, shown and parsed by one spelled name each, given once in a table.

/// Declare an enum whose variants each have one spelled name: serialized and deserialized as
/// that name, shown by `Display`, listed by `ALL` and `NAMES` in table order, and found again
/// by `from_name`. Each enum gives its own `FromStr`, with the error its users expect.
#[macro_export]
macro_rules! keyword_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Enum:ident {
            $( $(#[$vmeta:meta])* $Variant:ident = $name:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $Enum {
            $( $(#[$vmeta])* #[serde(rename = $name)] $Variant, )+
        }

        impl $Enum {
            /// Every value, in the order they are listed.
            pub const ALL: &'static [$Enum] = &[$($Enum::$Variant),+];
            /// Every spelled name, in the order of [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The spelled name, as stored and shown.
            pub const fn name(self) -> &'static str {
                match self {
                    $($Enum::$Variant => $name,)+
                }
            }

            /// The value spelled exactly `s`, if any.
            pub fn from_name(s: &str) -> Option<$Enum> {
                match s {
                    $($name => Some($Enum::$Variant),)+
                    _ => None,
                }
            }

            /// Every name, comma-separated, for "valid: ..." lists.
            pub fn names() -> String {
                Self::NAMES.join(", ")
            }
        }

        impl std::fmt::Display for $Enum {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// Check that every value of a keyword enum serializes to its name, deserializes back from it,
/// and is found by it; and that nothing else is. For unit tests.
#[cfg(test)]
pub fn assert_round_trips<T>(
    all: &[T],
    name: fn(&T) -> &'static str,
    from_name: fn(&str) -> Option<T>,
) where
    T: serde::Serialize
        + serde::de::DeserializeOwned
        + PartialEq
        + std::fmt::Debug
        + std::fmt::Display,
{
    let mut seen = std::collections::BTreeSet::new();
    for v in all {
        let n = name(v);
        assert!(seen.insert(n), "{n} twice");
        let json = serde_json::to_value(v).expect("serializes");
        assert_eq!(json, serde_json::Value::String(n.to_string()));
        let back: T = serde_json::from_value(json).expect("deserializes");
        assert_eq!(&back, v);
        assert_eq!(from_name(n).as_ref(), Some(v));
        assert_eq!(v.to_string(), n);
    }
    for bad in ["", "bogus", "Bogus "] {
        assert!(from_name(bad).is_none(), "{bad:?}");
        assert!(
            serde_json::from_value::<T>(serde_json::json!(bad)).is_err(),
            "{bad:?}"
        );
    }
}
