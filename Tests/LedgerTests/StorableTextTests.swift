import Testing

@testable import Ledger

/// `checkStorable` reads every byte without stopping early (a loop the compiler vectorizes): a NUL anywhere, in
/// short texts and long ones, first, last or in a vector's middle, is still found, and text without one passes.
struct StorableTextTests {
    @Test(arguments: [1, 2, 31, 32, 33, 64, 100, 4097])
    func aNULAtAnyPosition_isInvalidData(_ length: Int) {
        for position in Set([0, length / 2, length - 1]) {
            var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            bytes[position] = 0
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(throws: LedgerError.self) { try checkStorable(text) }
            do {
                try checkStorable(text)
            } catch {
                #expect(error.code == .invalidData)
            }
        }
    }

    @Test func textWithoutNUL_isStorable() throws {
        try checkStorable("")
        try checkStorable(String(repeating: "é\u{1}\u{7F}z", count: 1000))
        try checkStorable(String(repeating: "x", count: 4097))
    }
}
