// libFuzzer target for `HTTPRequestDecoder`. Build with `swift build -c release --sanitize=fuzzer
// --sanitize=address`; a plain `swift build` links it as a program that does nothing.
//
// Besides crashes, it checks the decoder's contract: the same bytes fed whole, one byte at a time, and in pieces
// whose sizes come from the input must produce the same events. The first input byte picks the limits, so that
// the header and body limits are hit often, or are absent.

import HTTP1Server

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let settings = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let maxHeaderBytes = settings & 1 == 0 ? 16 * 1024 : 64 + Int(settings >> 2)
    // Bit 2 lifts the body limit entirely: a declared length must never be allocated before its bytes arrive.
    let maxBodyBytes = settings & 2 == 0 ? 4 * 1024 * 1024 : settings & 4 == 0 ? Int(settings >> 3) : .max

    func decode(pieces: [ArraySlice<UInt8>]) -> [HTTPRequestDecoder.Event] {
        // No socket: the request comes from nowhere, and says so.
        var decoder = HTTPRequestDecoder(
            peer: HTTPPeer(address: "fuzz", isLoopback: false),
            listener: HTTPListener(address: "fuzz", isLoopback: false),
            maxHeaderBytes: maxHeaderBytes, maxBodyBytes: maxBodyBytes)
        var events: [HTTPRequestDecoder.Event] = []
        for piece in pieces {
            decoder.feed(piece)
            while true {
                let event = decoder.next()
                if case .needMoreData = event { break }
                events.append(event)
                if case .failure = event {
                    // A failed decoder stays failed, whatever follows.
                    decoder.feed([0x47, 0x45, 0x54])
                    guard decoder.next() == event else { fatalError("decoder recovered after \(event)") }
                    return events
                }
            }
        }
        return events
    }

    let whole = decode(pieces: [bytes[...]])
    let byteByByte = decode(pieces: bytes.indices.map { bytes[$0..<$0 + 1] })
    guard whole == byteByByte else {
        fatalError("fed whole: \(whole)\nfed byte by byte: \(byteByByte)")
    }
    // Piece sizes from the input itself: 1 to 16 bytes, cycling through its bytes.
    var pieces: [ArraySlice<UInt8>] = []
    var start = 0
    var index = 0
    while start < bytes.count {
        let length = min(1 + Int(bytes[index % bytes.count] & 15), bytes.count - start)
        pieces.append(bytes[start..<start + length])
        start += length
        index += 1
    }
    let inPieces = decode(pieces: pieces)
    guard whole == inPieces else { fatalError("fed whole: \(whole)\nfed in pieces: \(inPieces)") }
    return 0
}
