//! Output writers (work in progress).
