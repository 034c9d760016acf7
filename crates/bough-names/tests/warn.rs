//! Malformed store file names are ignored with a warning; foreign names only
//! at debug level; valid names silently.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use bough_names::{FileKind, classify};

/// A writer that appends to a shared buffer, so the test can read the log.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buf {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

/// Classifies `name` under a capturing subscriber; returns the kind and log.
fn classify_logged(name: &str) -> (FileKind, String) {
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let kind = tracing::subscriber::with_default(subscriber, || classify(name));
    (kind, buf.text())
}

#[test]
fn malformed_store_names_warn() {
    for name in [
        "manifest_",
        "manifest_main",
        "manifest_main_05",
        "manifest_Main_5",
        "manifest_main_5.tmp",
        "data_abc_5",
        "data_10_main",
        "data_1_main_18446744073709551616",
        "data_1_x_2_3",
        "wal_1_main",
        "wal_01_main_2",
        "CURRENT_TERM.",
        "CURRENT_TERM.MAIN",
    ] {
        let (kind, log) = classify_logged(name);
        assert_eq!(kind, FileKind::Unknown(name.to_owned()));
        assert_eq!(log.lines().count(), 1, "{name}: {log}");
        assert!(log.contains("WARN"), "{name}: {log}");
        assert!(log.contains(name), "log does not name {name}: {log}");
    }
}

#[test]
fn foreign_names_log_at_debug_only() {
    for name in ["README", "LOCKS", ".DS_Store", "foo.1.tmp", "manifest"] {
        let (kind, log) = classify_logged(name);
        assert_eq!(kind, FileKind::Unknown(name.to_owned()));
        assert!(!log.contains("WARN"), "{name}: {log}");
        assert!(log.contains("DEBUG"), "{name}: {log}");
    }
}

#[test]
fn valid_names_log_nothing() {
    for name in [
        "manifest_main_5",
        "manifest_feature_5_123",
        "data_10_main_5",
        "wal_3_main_5",
        "CURRENT_TERM.feature",
        "CURRENT_TERM.main.1.tmp",
        "LOCK",
    ] {
        let (kind, log) = classify_logged(name);
        assert!(kind.is_known(), "{name}");
        assert!(log.is_empty(), "{name}: {log}");
    }
}

#[test]
fn control_characters_are_escaped_in_the_log() {
    let (_, log) = classify_logged("manifest_main_5\nWARN forged");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("manifest_main_5\\nWARN forged"), "{log}");
}
