//! Closed sets of named values — `--to`'s outputs, `--sort`'s orders, byte orders, MOJO
//! metrics, push protocols — spelled the same way by the command line, the Python package
//! and every error message. Each set is declared once with [`choices!`](crate::choices),
//! which keeps each name beside its variant and its one-line description; the command hands
//! the table to its argument parser, so the library itself depends on none (a build without
//! the `cli` feature has no clap).

/// A value chosen by name from a closed set.
pub trait Choice: Copy + Sized + 'static {
    /// Every value with its name and its description (the variant's documentation), in the
    /// order help lists them.
    const ALL: &'static [(Self, &'static str, &'static str)];

    /// The value's name.
    fn name(self) -> &'static str;

    /// The value named `name`, exactly as spelled.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, n, _)| *n == name).map(|(v, _, _)| *v)
    }

    /// The value named `name`, ignoring ASCII case (the Python package's keyword values).
    fn from_name_ignoring_case(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, n, _)| n.eq_ignore_ascii_case(name)).map(|(v, _, _)| *v)
    }

    /// Every name, in order.
    fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.iter().map(|(_, n, _)| *n)
    }

    /// Every name, comma-separated (for messages).
    fn names_listed() -> String {
        Self::names().collect::<Vec<_>>().join(", ")
    }
}

/// Declares an enum of unit variants and its [`Choice`](crate::choice::Choice) table: each
/// variant is written `Variant = "name",` after its documentation, which becomes its
/// description. Variants take documentation only (other attributes would be ambiguous here).
#[macro_export]
macro_rules! choices {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[doc = $doc:literal])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl $crate::choice::Choice for $name {
            const ALL: &'static [(Self, &'static str, &'static str)] =
                &[$( ($name::$variant, $text, concat!($($doc),*)), )*];

            fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )*
                }
            }
        }

        /// The value's name (its [`Choice`](crate::choice::Choice) name).
        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str($crate::choice::Choice::name(*self))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Choice;

    crate::choices! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Fruit {
            /// A red one.
            Apple = "apple",
            /// A long
            /// yellow one.
            BigBanana = "big-banana",
        }
    }

    #[test]
    fn names_descriptions_and_look_ups() {
        assert_eq!(Fruit::ALL.len(), 2);
        assert_eq!(Fruit::ALL[1], (Fruit::BigBanana, "big-banana", " A long yellow one."));
        assert_eq!(Fruit::BigBanana.name(), "big-banana");
        assert_eq!(Fruit::Apple.to_string(), "apple");
        assert_eq!(Fruit::from_name("big-banana"), Some(Fruit::BigBanana));
        assert_eq!(Fruit::from_name("Big-Banana"), None);
        assert_eq!(Fruit::from_name_ignoring_case("Big-Banana"), Some(Fruit::BigBanana));
        assert_eq!(Fruit::from_name("pear"), None);
        assert_eq!(Fruit::names_listed(), "apple, big-banana");
    }
}
