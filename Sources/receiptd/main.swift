#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CryptoFloor

// First, before anything touches OpenSSL: see its documentation for the crash at exit this prevents.
keepOpenSSLStateUntilProcessExit()
let arguments = Array(CommandLine.arguments.dropFirst())
exit(runReceiptd(arguments))
