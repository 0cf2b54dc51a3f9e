import JSONText
import Testing

/// `parsingText` says a text is what `serialized()` writes only when it is, byte for byte: answers then copy it.
struct JSONSerializedTextTests {
    @Test(arguments: [
        #"{"a":1}"#, #"{"a":"é","b":[true,false,null],"c":{},"d":[],"e":-5,"f":0}"#, "[]", #""x""#,
        #"{"a":{"b":[1,{"c":"d"}]}}"#, #"{"a":9223372036854775807,"b":-9223372036854775808}"#,
    ])
    func serializedText_isSaidSo(_ text: String) throws {
        let (value, isSerialized) = try JSONValue.parsingText(Array(text.utf8))
        #expect(isSerialized)
        #expect(value.serialized() == Array(text.utf8))
    }

    @Test(arguments: [
        #"{"a": 1}"#, #" {"a":1}"#, "{\"a\":1}\n", #"{"a":"\u0041"}"#, #"{"a":"\/"}"#, #"{"a":"\""}"#, #"{"a":"<"}"#,
        #"{"a":"x&y"}"#, #"{"a":">"}"#, "{\"a\":\"\u{7F}\"}", #"{"a":-0}"#, #"{"a":1.0}"#, #"{"a":1e2}"#,
        #"{"a":12345678901234567890}"#, "\u{FEFF}{\"a\":1}", "[1, 2]",
    ])
    func textWrittenOtherwise_isNotSaidSerialized(_ text: String) throws {
        #expect(try !JSONValue.parsingText(Array(text.utf8)).isSerialized)
    }
}
