//! PMU catalogs and top-down methodology (work in progress).
