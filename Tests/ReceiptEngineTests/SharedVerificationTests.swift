import Dispatch
import Synchronization
import TestSupport
import Testing

import ReceiptEngine
import ReceiptForge

/// A signer's key keeps one verification context per digest, set up once and copied for every signature; the copies
/// must stay independent when many threads verify with one key at once.
struct SharedVerificationTests {
    @Test func oneKey_verifyingFromManyThreadsAtOnce_keepsEveryVerdict() throws {
        let validator = TestPKI.validator()
        let good = try TestPKI.blueprint().forge(with: TestPKI.standard)
        // The signature is the receipt's last element: its last byte changed, the chain still matches the cache.
        var lastByteChanged = good
        lastByteChanged[lastByteChanged.count - 1] ^= 0x01
        let altered = lastByteChanged
        #expect(validator.validate(good).isValid)
        let wrong = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 400) { index in
            let result = validator.validate(index.isMultiple(of: 2) ? good : altered)
            let expected = index.isMultiple(of: 2) ? nil : ValidationError.Code.signatureInvalid
            if result.error?.code != expected { wrong.withLock { $0 += 1 } }
        }
        #expect(wrong.withLock { $0 } == 0)
    }
}
