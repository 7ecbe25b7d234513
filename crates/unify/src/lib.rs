//! No code: see Cargo.toml. The features this crate enables make the command's release build
//! and the Python module's share their compiled dependencies.
