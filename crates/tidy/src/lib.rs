//! `tidy` has no code of its own: its tests (`tests/tidy.rs`) read the workspace's sources and manifests and
//! fail when an invariant of ARCHITECTURE.md is broken.
