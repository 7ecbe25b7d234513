//! Empty: syn is a build-dependency only so that its features unify with the proc-macros'
//! (host) build of syn.
fn main() {}
