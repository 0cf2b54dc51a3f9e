internal import Glibc

/// A value guarded by a `pthread_mutex_t`.
///
/// Not `Synchronization.Mutex`: on Linux it waits with raw futex calls that ThreadSanitizer does not see, so every
/// access it guards would be reported as a race, hiding real ones.
package final class LockedState<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
