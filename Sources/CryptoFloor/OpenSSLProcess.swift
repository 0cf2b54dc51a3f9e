internal import COpenSSL

/// Keeps OpenSSL's global state until the process ends, instead of letting OpenSSL free it in its `atexit` handler.
///
/// That handler frees the list OpenSSL walks when a thread that used it ends. Dispatch worker threads that verified
/// signatures end on their own schedule, so one ending while `exit` runs walked freed memory: `receiptd serve` crashed
/// inside libcrypto on its way out after SIGTERM. The kernel reclaims the memory anyway.
///
/// Call it before any other OpenSSL use: OpenSSL's first initialisation decides whether the handler is registered.
/// - Returns: false when OpenSSL could not initialise.
@discardableResult
public func keepOpenSSLStateUntilProcessExit() -> Bool {
    OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
}
