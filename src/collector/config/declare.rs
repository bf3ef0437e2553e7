//! How a section of the configuration is declared: the [`section!`] macro, the [`Section`] trait
//! it implements, the [`Text`] a variable or flag is parsed from, and the checks a key may carry.
//!
//! A key is its field: its `///` documentation (the reference shown by `toolsize gen-config`,
//! whose first sentence is its flag's help), its type, its default (`= expr`), and in
//! `#[key(...)]` its variable, flag and checks. From one declaration the macro generates the
//! struct (`deny_unknown_fields`, every key defaulted), its `Default` and its [`Section`] impl:
//! the [`Key`]s it holds and the checks of its values. Nothing else names the key.
//!
//! ```ignore
//! section! {
//!     /// Per (service, tool) aggregation.
//!     pub struct AggregationConfig {
//!         /// Cardinality cap on (service, tool) series; further series are counted in one
//!         /// overflow series.
//!         #[key(env = "TOOLSIZE_MAX_SERIES", flag = "--max-series", value_name = "N", check = above(0))]
//!         pub max_series: usize = 2000,
//!         /// Sub-tables are declared as sections of their own and named here.
//!         #[section]
//!         pub(crate) p95_jump: P95JumpConfig,
//!     }
//! }
//! ```
//!
//! The key attributes, each optional: `env = "TOOLSIZE_…"` (the variable setting it), `flag =
//! "--…"` (the `toolsize serve` flag, [`super::flags`]), `value_name = "…"` (the flag's
//! placeholder), `example = "…"` (shown commented out in the generated file for a key unset by
//! default), `replaces = "path"` (setting it from a higher source unsets that key), `check = f`
//! (`f(&value) -> Result<(), String>`, run after every source is merged; any number of them).
//! `#[section]` marks a sub-table; `#[skip]` a field that is not read from anywhere
//! (`#[serde(skip)]`, no key).

use std::fmt::Display;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::keys::Key;
use super::values::{Interval, ListenAddr, ServiceRate, Window};

/// A table of the configuration, declared by [`section!`] (or, for the library's
/// [`StackConfig`](crate::layers::StackConfig), by hand in [`super::layers`]).
pub(crate) trait Section: Default + Serialize {
    /// The table's documentation: the struct's.
    const DOC: &'static str;

    /// Appends the section's keys under `path` (empty: the root): its table key (not for the
    /// root), its value keys in field order, then its sub-sections' keys. Value keys come before
    /// sub-tables, as a TOML file must write them.
    fn keys(path: &str, out: &mut Vec<Key>);

    /// Checks every value of the section and its sub-sections with the checks its keys declare;
    /// the first that fails, as (dotted key, what is wrong).
    fn check(&self, path: &str) -> Result<(), (String, String)>;
}

/// `path.leaf`, or `leaf` at the root.
pub(crate) fn join(path: &str, leaf: &str) -> String {
    if path.is_empty() {
        leaf.to_string()
    } else {
        format!("{path}.{leaf}")
    }
}

/// Declares one section of the configuration; see the [module docs](self).
macro_rules! section {
    (
        $(#[doc = $doc:literal])+
        $vis:vis struct $name:ident { $($body:tt)* }
    ) => {
        $crate::collector::config::declare::section!(@field
            [$(#[doc = $doc])+ $vis struct $name] [] [] [] [] []
            $($body)*
        );
    };

    // A value key, with or without key attributes.
    (@field $head:tt [$($f:tt)*] [$($d:tt)*] [$($k:tt)*] [$($s:tt)*] [$($c:tt)*]
        $(#[doc = $fdoc:literal])+
        $(#[key($($attr:tt)*)])?
        $fvis:vis $fname:ident : $fty:ty = $default:expr
        $(, $($rest:tt)*)?
    ) => {
        $crate::collector::config::declare::section!(@field $head
            [$($f)* $(#[doc = $fdoc])+ $fvis $fname: $fty,]
            [$($d)* $fname: $default,]
            [$($k)* ($fname, concat!($($fdoc, "\n"),+), $fty, [$($($attr)*)?])]
            [$($s)*]
            [$($c)* ($fname, [$($($attr)*)?])]
            $($($rest)*)?
        );
    };

    // A sub-section: a table of its own, defaulted as its type is.
    (@field $head:tt [$($f:tt)*] [$($d:tt)*] [$($k:tt)*] [$($s:tt)*] [$($c:tt)*]
        $(#[doc = $fdoc:literal])+
        #[section]
        $fvis:vis $fname:ident : $fty:ty
        $(, $($rest:tt)*)?
    ) => {
        $crate::collector::config::declare::section!(@field $head
            [$($f)* $(#[doc = $fdoc])+ $fvis $fname: $fty,]
            [$($d)* $fname: <$fty as ::std::default::Default>::default(),]
            [$($k)*]
            [$($s)* ($fname, $fty)]
            [$($c)*]
            $($($rest)*)?
        );
    };

    // A field read from nowhere.
    (@field $head:tt [$($f:tt)*] [$($d:tt)*] [$($k:tt)*] [$($s:tt)*] [$($c:tt)*]
        $(#[doc = $fdoc:literal])+
        #[skip]
        $fvis:vis $fname:ident : $fty:ty = $default:expr
        $(, $($rest:tt)*)?
    ) => {
        $crate::collector::config::declare::section!(@field $head
            [$($f)* $(#[doc = $fdoc])+ #[serde(skip)] $fvis $fname: $fty,]
            [$($d)* $fname: $default,]
            [$($k)*]
            [$($s)*]
            [$($c)*]
            $($($rest)*)?
        );
    };

    // Every field read: the struct, its default and its keys.
    (@field [$(#[doc = $doc:literal])+ $vis:vis struct $name:ident]
        [$($f:tt)*] [$($d:tt)*]
        [$(($kname:ident, $kdoc:expr, $kty:ty, [$($kattr:tt)*]))*]
        [$(($sname:ident, $sty:ty))*]
        [$(($cname:ident, [$($cattr:tt)*]))*]
    ) => {
        $(#[doc = $doc])+
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        $vis struct $name { $($f)* }

        impl ::std::default::Default for $name {
            fn default() -> Self {
                Self { $($d)* }
            }
        }

        impl $crate::collector::config::declare::Section for $name {
            const DOC: &'static str = concat!($($doc, "\n"),+);

            fn keys(path: &str, out: &mut Vec<$crate::collector::config::keys::Key>) {
                use $crate::collector::config::keys::Key;
                if !path.is_empty() {
                    out.push(Key::table(path.to_string(), Self::DOC));
                }
                $(
                    out.push($crate::collector::config::declare::section!(@attrs
                        Key::value::<$kty>(path, stringify!($kname), $kdoc); $($kattr)*
                    ));
                )*
                $(
                    <$sty as $crate::collector::config::declare::Section>::keys(
                        &$crate::collector::config::declare::join(path, stringify!($sname)),
                        out,
                    );
                )*
            }

            fn check(&self, path: &str) -> Result<(), (String, String)> {
                $(
                    $crate::collector::config::declare::section!(@check
                        self, path, $cname; $($cattr)*
                    );
                )*
                $(
                    $crate::collector::config::declare::Section::check(
                        &self.$sname,
                        &$crate::collector::config::declare::join(path, stringify!($sname)),
                    )?;
                )*
                let _ = path;
                Ok(())
            }
        }
    };

    // The key attributes as calls of `Key`'s builder; checks are not the key's.
    (@attrs $key:expr;) => { $key };
    (@attrs $key:expr; check = $v:expr $(, $($rest:tt)*)?) => {
        $crate::collector::config::declare::section!(@attrs $key; $($($rest)*)?)
    };
    (@attrs $key:expr; $a:ident = $v:expr $(, $($rest:tt)*)?) => {
        $crate::collector::config::declare::section!(@attrs $key.$a($v); $($($rest)*)?)
    };

    // The checks among the key attributes, run on the field.
    (@check $self:ident, $path:ident, $field:ident;) => {};
    (@check $self:ident, $path:ident, $field:ident; check = $v:expr $(, $($rest:tt)*)?) => {
        if let Err(message) = ($v)(&$self.$field) {
            return Err((
                $crate::collector::config::declare::join($path, stringify!($field)),
                message,
            ));
        }
        $crate::collector::config::declare::section!(@check $self, $path, $field; $($($rest)*)?);
    };
    (@check $self:ident, $path:ident, $field:ident; $a:ident = $v:expr $(, $($rest:tt)*)?) => {
        $crate::collector::config::declare::section!(@check $self, $path, $field; $($($rest)*)?);
    };
}
pub(crate) use section;

/// A value a variable or flag sets from text: the texts given (one per flag occurrence, or the
/// variable's) parsed as the key's type. A list is comma-separated (and a flag repeatable); an
/// optional value given as blank text is unset.
pub(crate) trait Text: Serialize + Sized {
    /// The value `texts` give.
    fn from_texts(texts: &[String]) -> Result<Self, String>;
}

/// A single value parsed from text.
pub(crate) trait Scalar: Serialize + Sized {
    /// Parses one trimmed item.
    fn parse_item(item: &str) -> Result<Self, String>;
}

macro_rules! scalars {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn parse_item(item: &str) -> Result<Self, String> {
                item.parse::<$t>().map_err(|e| {
                    let e = e.to_string();
                    // Some parsers name the value already.
                    if e.contains(&format!("{item:?}")) { e } else { format!("{item:?}: {e}") }
                })
            }
        }
    )*};
}
scalars!(
    ListenAddr,
    u32,
    u64,
    usize,
    f64,
    bool,
    String,
    PathBuf,
    Interval,
    Window,
    ServiceRate,
    super::alerts::WebhookFormat,
    super::sections::LogFormat,
    super::sections::Durability
);

/// The last text given (a flag given twice: the last one wins, as with clap's usual flags).
fn last(texts: &[String]) -> &str {
    texts.last().map_or("", |t| t.trim())
}

impl<T: Scalar> Text for T {
    fn from_texts(texts: &[String]) -> Result<Self, String> {
        T::parse_item(last(texts))
    }
}

impl<T: Scalar> Text for Option<T> {
    fn from_texts(texts: &[String]) -> Result<Self, String> {
        match last(texts) {
            "" => Ok(None),
            item => T::parse_item(item).map(Some),
        }
    }
}

impl<T: Scalar> Text for Vec<T> {
    fn from_texts(texts: &[String]) -> Result<Self, String> {
        texts
            .iter()
            .flat_map(|t| t.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(T::parse_item)
            .collect()
    }
}

/// `texts` as the JSON the key's type serialises to, or why they are not one.
pub(crate) fn json_from_texts<T: Text>(texts: &[String]) -> Result<Value, String> {
    serde_json::to_value(T::from_texts(texts)?).map_err(|e| e.to_string())
}

/// Check: above `min`.
pub(crate) fn above<T: PartialOrd + Display>(min: T) -> impl Fn(&T) -> Result<(), String> {
    move |v| match *v > min {
        true => Ok(()),
        false => Err(format!("must be above {min}")),
    }
}

/// Check: at least `min`.
pub(crate) fn at_least<T: PartialOrd + Display>(min: T) -> impl Fn(&T) -> Result<(), String> {
    move |v| match *v >= min {
        true => Ok(()),
        false => Err(format!("must be at least {min}")),
    }
}

/// Check: between `min` and `max`, both included.
pub(crate) fn between<T: PartialOrd + Display>(
    min: T,
    max: T,
) -> impl Fn(&T) -> Result<(), String> {
    move |v| match *v >= min && *v <= max {
        true => Ok(()),
        false => Err(format!("must be between {min} and {max}")),
    }
}
