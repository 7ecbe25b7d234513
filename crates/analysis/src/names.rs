//! One name model for functions: the names spelunk shows are demangled (blazesym demangles
//! C++ and Rust symbols as it reads them), and the names a user gives (`--symbol`, `annotate`)
//! may be the full demangled name (`walk(long const*, unsigned long)`), a short form without
//! parameters, template arguments or return type (`walk`, `shapes::Grid::sum_every`, or any
//! `::`-suffix of it such as `sum_every`), or the mangled name (`_Z4walkPKlm`).
//!
//! Pieces of one function that GCC emits as separate symbols — the unlikely code it moves to
//! `.text.unlikely` (`f.cold`, demangled `f(int) [clone .cold]`) and partial inlining's
//! `f.part.0` — are parts of the function they were cut from: [`base_name`] strips the
//! suffixes, so `f` names all of them (GCC's clone suffixes: "Using the GNU Compiler
//! Collection", options `-freorder-blocks-and-partition` and `-fpartial-inlining`).

/// GCC's clone suffixes that mark a piece of another function rather than a function of its
/// own (`.constprop`/`.isra` clones are specialised copies, also named after their origin).
const CLONE_KINDS: &[&str] = &[
    "cold",
    "part",
    "constprop",
    "isra",
    "lto_priv",
    "localalias",
];

/// `name` without GCC's clone suffixes: `f(int) [clone .cold]` and `f.cold` → `f(int)`, `f`;
/// `f.part.0` → `f`. Other names are returned as they are.
pub fn base_name(name: &str) -> &str {
    let mut s = name;
    loop {
        let before = s.len();
        // Demangled C++: "f(int) [clone .cold] [clone .part.0]".
        if let Some(rest) = s.strip_suffix(']') {
            if let Some(i) = rest.rfind(" [clone .") {
                let kind = &rest[i + " [clone .".len()..];
                if CLONE_KINDS.iter().any(|k| clone_kind_is(kind, k)) {
                    s = &s[..i];
                }
            }
        }
        // C (not mangled): "f.cold", "f.part.0", "f.constprop.0.isra.0".
        if let Some(i) = s.rfind('.') {
            let (head, tail) = (&s[..i], &s[i + 1..]);
            if !head.is_empty() && !head.ends_with('.') {
                if CLONE_KINDS.contains(&tail) {
                    s = head;
                } else if tail.bytes().all(|b| b.is_ascii_digit()) && !tail.is_empty() {
                    if let Some(j) = head.rfind('.') {
                        if CLONE_KINDS.contains(&&head[j + 1..]) && j > 0 {
                            s = &head[..j];
                        }
                    }
                }
            }
        }
        if s.len() == before {
            return s;
        }
    }
}

/// `kind` ("cold", "part.0", "constprop.1") is the clone kind `k`, with or without a number.
fn clone_kind_is(kind: &str, k: &str) -> bool {
    match kind.strip_prefix(k) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('.')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// Whether `name` is a part of another function (a `.cold`/`.part.N`... piece).
pub fn is_part(name: &str) -> bool {
    base_name(name).len() != name.len()
}

/// Where a byte of a demangled name is: inside how many template argument lists (`<>`) and
/// how many other brackets (`()`, `[]`, `{}`), and whether it belongs to an operator's name
/// (`operator<`, `operator()`, `operator->`...), which is not a bracket.
#[derive(Clone, Copy, Debug, Default)]
struct Depth {
    angle: i32,
    other: i32,
    operator: bool,
}

/// Calls `f(i, byte, depth)` for each byte of `s`; an opening bracket gets the depth outside
/// it, a closing one the depth after it.
fn scan(s: &str, mut f: impl FnMut(usize, u8, Depth)) {
    let b = s.as_bytes();
    let mut d = Depth::default();
    let mut i = 0;
    while i < b.len() {
        if s[i..].starts_with("operator") && (i == 0 || !is_ident(b[i - 1])) {
            let end = i + "operator".len();
            let mut k = end;
            if s[k..].starts_with("()") || s[k..].starts_with("[]") {
                k += 2;
            } else {
                while k < b.len() && b"<>=!-+*/%&|^~".contains(&b[k]) {
                    k += 1;
                }
            }
            let op = Depth {
                operator: true,
                ..d
            };
            for (j, &c) in b.iter().enumerate().take(k).skip(i) {
                f(j, c, op);
            }
            i = k;
            continue;
        }
        let c = b[i];
        match c {
            b'<' => {
                f(i, c, d);
                d.angle += 1;
            }
            b'(' | b'[' | b'{' => {
                f(i, c, d);
                d.other += 1;
            }
            b'>' => {
                d.angle -= 1;
                f(i, c, d);
            }
            b')' | b']' | b'}' => {
                d.other -= 1;
                f(i, c, d);
            }
            _ => f(i, c, d),
        }
        i += 1;
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Where the parameter list of a demangled name starts: its last top-level `(`.
fn parameters_start(name: &str) -> Option<usize> {
    let mut last_open = None;
    scan(name, |i, c, d| {
        if c == b'(' && d.angle == 0 && d.other == 0 && !d.operator {
            last_open = Some(i);
        }
    });
    last_open.filter(|i| *i > 0)
}

/// The short form of a demangled function name: without return type, template arguments,
/// parameters, qualifiers and clone suffixes. `void std::vector<long>::_M_realloc_insert<long>(
/// iterator, long&&)` → `std::vector::_M_realloc_insert`; `walk(long const*, unsigned long)` →
/// `walk`; `main::{lambda(int)#1}::operator()(int) const` → `main::{lambda(int)#1}::operator()`.
pub fn short_name(name: &str) -> String {
    let base = base_name(name).trim();
    // Cut the parameter list and what follows it (` const`, `&&`, ` noexcept`...).
    let head = match parameters_start(base) {
        Some(i) => &base[..i],
        None => base,
    };
    // Drop template arguments and keep what follows the last top-level space (the return
    // type of a template function precedes it), except in `operator new` and the like.
    let mut out = String::with_capacity(head.len());
    let bytes = head.as_bytes();
    scan(head, |i, c, d| {
        if d.operator {
            out.push(c as char);
            return;
        }
        if d.angle > 0 || c == b'<' || c == b'>' {
            return;
        }
        if c == b' ' && d.other == 0 {
            let before_template = bytes.get(i + 1) == Some(&b'<');
            if !before_template && !head[..i].ends_with("operator") {
                out.clear();
            }
            if head[..i].ends_with("operator") {
                out.push(' ');
            }
            return;
        }
        out.push(c as char);
    });
    out
}

/// The demangled form of a mangled C++ (`_Z...`) or Rust name; `None` for other names.
pub fn demangle(name: &str) -> Option<String> {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return Some(format!("{d:#}"));
    }
    if !name.starts_with("_Z") {
        return None;
    }
    let (mangled, suffix) = split_mangled_suffix(name);
    let sym = cpp_demangle::Symbol::new(mangled).ok()?;
    let d = sym.demangle().ok()?;
    Some(match suffix {
        Some(s) => format!("{d} [clone .{s}]"),
        None => d,
    })
}

/// A mangled name and its GCC clone suffix (`_Z5checkPKli.cold` → (`_Z5checkPKli`, `cold`)).
fn split_mangled_suffix(name: &str) -> (&str, Option<&str>) {
    match name.find('.') {
        Some(i) if i > 0 => (&name[..i], Some(&name[i + 1..])),
        _ => (name, None),
    }
}

/// A function name as a user gave it, matched against symbolized (demangled) names.
#[derive(Clone, Debug)]
pub struct FunctionQuery {
    given: String,
    /// The demangled form of a mangled query.
    demangled: Option<String>,
    /// The short form of the query (for `Grid<long>::sum_every` and `sum_every` alike).
    short: String,
    /// Whether the query has a parameter list (then only full names match it).
    with_parameters: bool,
}

/// How a name matched a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameMatch {
    /// The full name (or its mangled form), or one of its parts.
    Full,
    /// The short form or a `::`-suffix of it: possibly several overloads.
    Short,
}

impl FunctionQuery {
    pub fn new(given: &str) -> Self {
        let given = given.trim().to_string();
        FunctionQuery {
            demangled: demangle(&given),
            short: short_name(&given),
            with_parameters: parameters_start(base_name(&given)).is_some(),
            given,
        }
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.given
    }

    /// Whether `name` (as symbolized) is the function asked for, and how.
    pub fn matches(&self, name: &str) -> Option<NameMatch> {
        let base = base_name(name);
        let full = |q: &str| q == name || q == base;
        if full(&self.given) || self.demangled.as_deref().is_some_and(full) {
            return Some(NameMatch::Full);
        }
        if self.short.is_empty() || self.with_parameters {
            return None;
        }
        let short = short_name(name);
        let qualified_suffix = short
            .strip_suffix(self.short.as_str())
            .is_some_and(|head| head.ends_with("::"));
        if short == self.short || qualified_suffix {
            Some(NameMatch::Short)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_suffixes_are_parts_of_their_function() {
        assert_eq!(
            base_name("check(long const*, int) [clone .cold]"),
            "check(long const*, int)"
        );
        assert_eq!(base_name("f(int) [clone .part.0] [clone .cold]"), "f(int)");
        assert_eq!(base_name("main.cold"), "main");
        assert_eq!(base_name("work.part.0"), "work");
        assert_eq!(base_name("work.constprop.0.isra.0"), "work");
        assert_eq!(
            base_name("f(int) [clone .something]"),
            "f(int) [clone .something]"
        );
        assert_eq!(base_name("version.1.2"), "version.1.2");
        assert_eq!(base_name(".cold"), ".cold");
        assert!(is_part("main.cold") && !is_part("main"));
    }

    #[test]
    fn short_forms_drop_return_type_templates_and_parameters() {
        let cases = [
            ("walk(long const*, unsigned long)", "walk"),
            ("shapes::Grid<long>::sum_every(unsigned long) const", "shapes::Grid::sum_every"),
            (
                "void std::vector<long, std::allocator<long> >::_M_realloc_insert<long>(__gnu_cxx::__normal_iterator<long*, std::vector<long, std::allocator<long> > >, long&&)",
                "std::vector::_M_realloc_insert",
            ),
            ("main::{lambda(int)#1}::operator()(int) const", "main::{lambda(int)#1}::operator()"),
            ("bool operator< <int>(Box<int> const&, Box<int> const&)", "operator<"),
            ("operator new(unsigned long)", "operator new"),
            ("S::operator<<(int)", "S::operator<<"),
            ("(anonymous namespace)::helper(int)", "(anonymous namespace)::helper"),
            ("check(long const*, int) [clone .cold]", "check"),
            ("main", "main"),
            ("triad.part.0", "triad"),
        ];
        for (full, short) in cases {
            assert_eq!(short_name(full), short, "{full}");
        }
    }

    #[test]
    fn mangled_names_demangle_with_their_clone_suffix() {
        // Itanium C++ ABI mangling: _Z <length> <name> <parameter types>; PKl = long const*,
        // m = unsigned long, i = int.
        assert_eq!(
            demangle("_Z4walkPKlm").as_deref(),
            Some("walk(long const*, unsigned long)")
        );
        assert_eq!(
            demangle("_Z5checkPKli.cold").as_deref(),
            Some("check(long const*, int) [clone .cold]")
        );
        assert_eq!(demangle("walk"), None);
    }

    #[test]
    fn queries_match_full_short_suffix_and_mangled_names() {
        let walk_long = "walk(long const*, unsigned long)";
        let walk_double = "walk(double const*, unsigned long)";
        let sum = "shapes::Grid<long>::sum_every(unsigned long) const";
        let q = |s: &str| FunctionQuery::new(s);
        assert_eq!(q(walk_long).matches(walk_long), Some(NameMatch::Full));
        assert_eq!(q(walk_long).matches(walk_double), None);
        assert_eq!(q("walk").matches(walk_long), Some(NameMatch::Short));
        assert_eq!(q("walk").matches(walk_double), Some(NameMatch::Short));
        assert_eq!(q("_Z4walkPKlm").matches(walk_long), Some(NameMatch::Full));
        assert_eq!(q("_Z4walkPKlm").matches(walk_double), None);
        for s in [
            "sum_every",
            "Grid::sum_every",
            "shapes::Grid<long>::sum_every",
        ] {
            assert_eq!(q(s).matches(sum), Some(NameMatch::Short), "{s}");
        }
        assert_eq!(q("every").matches(sum), None);
        assert_eq!(
            q("check").matches("check(long const*, int) [clone .cold]"),
            Some(NameMatch::Short)
        );
        assert_eq!(
            q("check(long const*, int)").matches("check(long const*, int) [clone .cold]"),
            Some(NameMatch::Full)
        );
        assert_eq!(q("main").matches("main.cold"), Some(NameMatch::Full));
        assert_eq!(
            q("main").matches("main::{lambda(int)#1}::operator()(int) const"),
            None
        );
        // A C function is its own full and short name.
        assert_eq!(q("triad").matches("triad"), Some(NameMatch::Full));
        assert_eq!(q("triad").matches("triad2"), None);
    }
}
