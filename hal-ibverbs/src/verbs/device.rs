//! The RDMA devices libibverbs sees.

use super::*;

/// The RDMA devices libibverbs sees (`ibv_get_device_list`). Never empty.
#[derive(Debug)]
pub struct DeviceList {
    pub(super) list: NonNull<*mut ibv_device>,
    pub(super) len: usize,
}

// SAFETY: the list is an immutable array owned by this value until
// `ibv_free_device_list`; libibverbs allows it to be read and freed from any
// thread.
unsafe impl Send for DeviceList {}
// SAFETY: shared access only reads the array and calls thread-safe verbs.
unsafe impl Sync for DeviceList {}

impl DeviceList {
    /// The devices. Fails with [`VerbsError::LibraryMissing`] when
    /// libibverbs cannot be loaded and with [`VerbsError::NoDevices`] when it
    /// finds no device.
    pub fn new() -> Result<DeviceList, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid `int` to write the count to. The function
        // returns NULL or a NULL-terminated array that stays valid until it
        // is passed to `ibv_free_device_list`, which `Drop` does.
        let raw = unsafe { sys::ibv_get_device_list(&mut n) };
        let Some(list) = NonNull::new(raw) else {
            let e = last_errno();
            if !library_available() {
                return Err(VerbsError::LibraryMissing);
            }
            if e == errno::ENOSYS || !kernel_has_rdma() {
                return Err(VerbsError::NoDevices { kernel_support: kernel_has_rdma(), errno: Some(e) });
            }
            return Err(VerbsError::verb(Op::GetDeviceList, e));
        };
        let list = DeviceList { list, len: usize::try_from(n).unwrap_or(0) };
        if list.len == 0 {
            return Err(VerbsError::NoDevices { kernel_support: kernel_has_rdma(), errno: None });
        }
        Ok(list)
    }

    fn raw(&self) -> &[*mut ibv_device] {
        // SAFETY: `ibv_get_device_list` returned an array of `len` device
        // pointers (plus a NULL terminator), valid and unchanged until `Drop`
        // frees it; the slice borrows `self`.
        unsafe { core::slice::from_raw_parts(self.list.as_ptr(), self.len) }
    }

    /// How many devices.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false` (an empty list is [`VerbsError::NoDevices`]).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The devices.
    pub fn iter(&self) -> impl Iterator<Item = Device<'_>> + '_ {
        self.raw().iter().filter_map(|p| NonNull::new(*p)).map(|raw| Device { raw, _list: PhantomData })
    }

    /// The device names.
    pub fn names(&self) -> Vec<String> {
        self.iter().map(|d| d.name()).collect()
    }

    /// Opens the device called `name`.
    pub fn open(&self, name: &str) -> Result<Context, VerbsError> {
        match self.iter().find(|d| d.name() == name) {
            Some(d) => d.open(),
            None => Err(VerbsError::DeviceNotFound { name: name.to_owned(), available: self.names() }),
        }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the array came from `ibv_get_device_list` and is freed once.
        // Contexts opened from it stay valid (libibverbs refcounts devices).
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) };
    }
}

/// One device of a [`DeviceList`].
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    pub(super) raw: NonNull<ibv_device>,
    pub(super) _list: PhantomData<&'a DeviceList>,
}

impl Device<'_> {
    /// The device name (`mlx5_0`, `rxe0`, …).
    pub fn name(&self) -> String {
        // SAFETY: `raw` is a device of a live list (the borrow of the list);
        // the function returns its name field or NULL.
        let p = unsafe { sys::ibv_get_device_name(self.raw.as_ptr()) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: a non-NULL name is a NUL-terminated string inside the
        // device struct, alive as long as the list.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The node GUID, host order.
    pub fn guid(&self) -> u64 {
        // SAFETY: `raw` is a device of a live list.
        u64::from_be(unsafe { sys::ibv_get_device_guid(self.raw.as_ptr()) })
    }

    /// Opens the device.
    pub fn open(&self) -> Result<Context, VerbsError> {
        let name = self.name();
        // SAFETY: `raw` is a device of a live list; the returned context is
        // owned by the `Context` built below and closed once in its `Drop`.
        let raw = unsafe { sys::ibv_open_device(self.raw.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| VerbsError::verb(Op::OpenDevice, last_errno()).on_device(&name))?;
        Ok(Context(Arc::new(ContextInner { raw, name, owned: true })))
    }
}
