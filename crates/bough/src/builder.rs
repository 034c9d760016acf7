//! [`StoreBuilder`]: a store's settings ([`Options`], plain data) together with the
//! components it runs on — the clock, a memory store, an object store, fault injection —
//! which are objects, not settings (as SlateDB's RFC 0010 separates them).

use std::sync::Arc;

use bough_io::{FaultInjector, MemoryStorage};
use bough_object::ObjectStore;

use crate::Store;
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::options::{Backend, Options};

/// The objects a store runs on, beside its settings.
#[derive(Debug, Clone)]
pub(crate) struct Components {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) faults: Option<FaultInjector>,
    pub(crate) memory: Option<MemoryStorage>,
    pub(crate) object_store: Option<Arc<dyn ObjectStore>>,
}

impl Default for Components {
    fn default() -> Self {
        Components {
            clock: Arc::new(SystemClock),
            faults: None,
            memory: None,
            object_store: None,
        }
    }
}

/// Opens a store from its settings and the components it should use instead of the
/// defaults (the system clock, storage the settings describe).
///
/// ```
/// use std::sync::Arc;
///
/// use bough::io::MemoryStorage;
/// use bough::{ManualClock, Options, Store};
///
/// let clock = ManualClock::new(1_700_000_000_000);
/// let memory = MemoryStorage::new();
/// let store = Store::builder(Options::in_memory().shards(1))
///     .clock(Arc::new(clock.clone()))
///     .memory(memory.clone())
///     .open()?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// main.put_blocking("k", "v")?;
/// assert_eq!(main.get_blocking("k")?.unwrap().timestamp, 1_700_000_000_000);
/// store.close()?;
///
/// // The same memory opens again, with what was written.
/// let again = Store::builder(Options::in_memory()).memory(memory).open()?;
/// assert!(again.partition("t", 0)?.branch("main")?.get_blocking("k")?.is_some());
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct StoreBuilder {
    settings: Options,
    parts: Components,
}

impl From<Options> for StoreBuilder {
    fn from(settings: Options) -> StoreBuilder {
        StoreBuilder {
            settings,
            parts: Components::default(),
        }
    }
}

impl Store {
    /// A builder for a store with these settings, to give it components (a clock, a memory
    /// or object store, fault injection) before it opens.
    pub fn builder(settings: Options) -> StoreBuilder {
        StoreBuilder::from(settings)
    }
}

impl StoreBuilder {
    /// The time source (default: the system clock). Expiry, tombstone retention, default
    /// timestamps, archive names and GC leases all read it.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.parts.clock = clock;
        self
    }

    /// Fault injection for the local backends (tests of failure handling).
    pub fn faults(mut self, faults: FaultInjector) -> Self {
        self.parts.faults = Some(faults);
        self
    }

    /// Opens (and shares) this memory store; sets `backend = "memory"`. Without it a
    /// memory store starts empty.
    pub fn memory(mut self, memory: MemoryStorage) -> Self {
        self.settings.backend = Backend::Memory;
        self.parts.memory = Some(memory);
        self
    }

    /// Uses `store` as the object store, instead of the one the `object` settings describe;
    /// sets `backend = "object"` (the cache goes to `path`).
    pub fn object_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.settings.backend = Backend::Object;
        self.parts.object_store = Some(store);
        self
    }

    /// Changes the settings: `builder.map_settings(|o| o.shards(1).page_size(8192))`.
    pub fn map_settings(mut self, f: impl FnOnce(Options) -> Options) -> Self {
        self.settings = f(self.settings);
        self
    }

    /// The settings.
    pub fn settings(&self) -> &Options {
        &self.settings
    }

    /// The settings, to change before opening.
    pub fn settings_mut(&mut self) -> &mut Options {
        &mut self.settings
    }

    /// Checks the settings with the components (an injected object store brings its own
    /// service settings; a memory store needs the memory backend).
    pub fn validate(&self) -> Result<()> {
        self.settings.check(self.parts.object_store.is_some())?;
        if self.parts.memory.is_some() && self.settings.backend != Backend::Memory {
            return Err(Error::invalid(
                "option `backend`: a memory store needs backend = \"memory\"",
            ));
        }
        Ok(())
    }

    /// Opens (creating if needed) the store, for writing (see [`Store::open`]).
    pub fn open(self) -> Result<Store> {
        self.validate()?;
        Store::open_with(self.settings, self.parts)
    }

    /// Opens an existing store for reading only (see [`Store::open_read_only`]).
    pub fn open_read_only(self) -> Result<Store> {
        self.validate()?;
        Store::open_read_only_with(self.settings, self.parts)
    }
}
