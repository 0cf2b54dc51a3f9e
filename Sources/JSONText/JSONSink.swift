/// Takes a JSON value piece by piece, in document order. One description of an answer, written against a sink, either
/// builds a `JSONValue` (`JSONTreeBuilder`: an answer edited before it is sent) or writes its compact text straight
/// away (`JSONWriter`: the hot path, with no tree to make and free), and both say the same by construction.
package protocol JSONSink {
    mutating func beginObject()
    mutating func endObject()
    mutating func beginArray()
    mutating func endArray()
    /// The name of the object member whose value comes next. Static only: with a `String` overload beside it, a
    /// literal name chose that one (a string's default type) and paid for an escape scan of every name.
    mutating func key(_ name: StaticString)
    /// A name made as UTF-8 (a payload's member renamed): written without making a `String`.
    mutating func key(utf8 name: [UInt8])
    mutating func null()
    mutating func bool(_ value: Bool)
    mutating func integer(_ value: Int64)
    mutating func string(_ value: String)
    /// A string whose UTF-8, which needs no escape (a date), `write` appends.
    mutating func plainString(_ write: (inout [UInt8]) -> Void)
    mutating func value(_ value: JSONValue)
    /// `value`, whose compact text `serialized()` would write is `text` (as received), when known.
    mutating func value(_ value: JSONValue, serializedText text: [UInt8]?)
}

extension JSONSink {
    @inlinable package mutating func string(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    @inlinable package mutating func integer(_ value: Int64?) {
        if let value { integer(value) } else { null() }
    }

    @inlinable package mutating func bool(_ value: Bool?) {
        if let value { bool(value) } else { null() }
    }

    @inlinable package mutating func value(_ value: JSONValue?) {
        if let value { self.value(value) } else { null() }
    }
}

/// Compact JSON text, byte for byte what `JSONValue.serialized()` writes for the same value.
///
/// Inlinable: answers are described in ReceiptService, and each call across the module boundary (a few hundred per
/// receipt answer) cost more than the bytes it wrote; inlined, the writer specializes into each description.
package struct JSONWriter: JSONSink {
    package var bytes: [UInt8] = []
    /// A value was written at this level: the next one is preceded by a comma.
    @usableFromInline var needsComma = false
    /// What was written before `bytes`, when some of it is kept text taken whole (``keptText(_:)``).
    @usableFromInline var pieces: [ArraySlice<UInt8>] = []

    @inlinable package init(capacity: Int = 1024) {
        bytes.reserveCapacity(capacity)
    }

    @inlinable mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    @inlinable mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    @inlinable mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    /// Constant bytes in one copy; `withUTF8Buffer` also serves a literal held as one scalar, where `utf8Start` traps.
    @inlinable mutating func literal(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inlinable package mutating func beginObject() { open(UInt8(ascii: "{")) }
    @inlinable package mutating func endObject() { close(UInt8(ascii: "}")) }
    @inlinable package mutating func beginArray() { open(UInt8(ascii: "[")) }
    @inlinable package mutating func endArray() { close(UInt8(ascii: "]")) }

    // Always inlined: the optimizer kept it a call, which cost more than its four appends.
    @inlinable @inline(__always) package mutating func key(_ name: StaticString) {
        separate()
        // Member names of answers are literals that need no escape.
        bytes.append(UInt8(ascii: "\""))
        literal(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    @inlinable package mutating func key(utf8 name: [UInt8]) {
        separate()
        name.withUnsafeBufferPointer { JSONValue.writeString(utf8: $0, into: &bytes) }
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Four bytes are cheaper appended one by one than through a string's UTF-8 view.
    @inlinable package mutating func null() {
        separate()
        bytes.append(UInt8(ascii: "n"))
        bytes.append(UInt8(ascii: "u"))
        bytes.append(UInt8(ascii: "l"))
        bytes.append(UInt8(ascii: "l"))
        needsComma = true
    }

    @inlinable package mutating func bool(_ value: Bool) {
        separate()
        literal(value ? "true" : "false")
        needsComma = true
    }

    @inlinable package mutating func integer(_ value: Int64) {
        separate()
        JSONValue.writeInteger(value, into: &bytes)
        needsComma = true
    }

    @inlinable package mutating func string(_ value: String) {
        separate()
        JSONValue.writeString(value, into: &bytes)
        needsComma = true
    }

    @inlinable package mutating func plainString(_ write: (inout [UInt8]) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        write(&bytes)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    @inlinable package mutating func value(_ value: JSONValue) {
        separate()
        value.write(into: &bytes, pretty: false, depth: 0)
        needsComma = true
    }

    @inlinable package mutating func value(_ value: JSONValue, serializedText text: [UInt8]?) {
        guard let text else { return self.value(value) }
        separate()
        bytes.append(contentsOf: text)
        needsComma = true
    }

    /// A value whose compact text is kept (across requests, say) and taken as a piece of the output rather than
    /// copied into it: ``takePieces()`` then gives the whole text.
    package mutating func keptText(_ text: [UInt8]) {
        separate()
        if !bytes.isEmpty {
            let capacity = bytes.capacity
            pieces.append(bytes[...])
            bytes = []
            bytes.reserveCapacity(min(capacity, 4096))
        }
        pieces.append(text[...])
        needsComma = true
    }

    /// Everything written, in order, as pieces (``keptText(_:)``'s texts among them, uncopied); the writer is then
    /// empty.
    package mutating func takePieces() -> [ArraySlice<UInt8>] {
        var taken = pieces
        if !bytes.isEmpty { taken.append(bytes[...]) }
        pieces = []
        bytes = []
        return taken
    }
}

/// Builds the `JSONValue` a sink is told.
package struct JSONTreeBuilder: JSONSink {
    private struct Level {
        var isObject: Bool
        var members: [(key: String, value: JSONValue)] = []
        var elements: [JSONValue] = []
        var key = ""
    }

    private var levels: [Level] = []
    /// The value once every container begun has ended.
    package private(set) var value: JSONValue = .null

    package init() {}

    private mutating func add(_ value: JSONValue) {
        guard !levels.isEmpty else {
            self.value = value
            return
        }
        let last = levels.count - 1
        if levels[last].isObject {
            levels[last].members.append((levels[last].key, value))
        } else {
            levels[last].elements.append(value)
        }
    }

    package mutating func beginObject() { levels.append(Level(isObject: true)) }
    package mutating func beginArray() { levels.append(Level(isObject: false)) }

    package mutating func endObject() {
        guard let level = levels.popLast() else { return }
        add(.object(level.members))
    }

    package mutating func endArray() {
        guard let level = levels.popLast() else { return }
        add(.array(level.elements))
    }

    package mutating func key(_ name: StaticString) { setKey(name.description) }

    package mutating func key(utf8 name: [UInt8]) { setKey(String(decoding: name, as: UTF8.self)) }

    private mutating func setKey(_ name: String) {
        guard !levels.isEmpty else { return }
        levels[levels.count - 1].key = name
    }

    package mutating func null() { add(.null) }
    package mutating func bool(_ value: Bool) { add(.bool(value)) }
    package mutating func integer(_ value: Int64) { add(.integer(value)) }
    package mutating func string(_ value: String) { add(.string(value)) }

    package mutating func plainString(_ write: (inout [UInt8]) -> Void) {
        var bytes: [UInt8] = []
        write(&bytes)
        add(.string(String(decoding: bytes, as: UTF8.self)))
    }

    package mutating func value(_ value: JSONValue) { add(value) }
    package mutating func value(_ value: JSONValue, serializedText text: [UInt8]?) { add(value) }
}

extension JSONValue {
    /// What `sink` is told by `describe`, as a value.
    package static func building(_ describe: (inout JSONTreeBuilder) -> Void) -> JSONValue {
        var builder = JSONTreeBuilder()
        describe(&builder)
        return builder.value
    }
}
