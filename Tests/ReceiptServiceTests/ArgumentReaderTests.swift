import Testing

@testable import receiptd

struct ArgumentReaderTests {
    @Test func optionsFlagsAndPositionals_inAnyOrder() throws {
        let reader = try ArgumentReader(
            ["a.der", "--config", "c.json", "--json", "--purchase=p1", "b.der", "--purchase", "p2"],
            options: ["--config", "--purchase"], flags: ["--json"])
        #expect(reader.positional == ["a.der", "b.der"])
        #expect(reader.value("--config") == "c.json")
        #expect(reader.values("--purchase") == ["p1", "p2"])
        #expect(reader.isSet("--json"))
        #expect(!reader.wantsHelp)
        #expect(reader.value("--missing") == nil)
    }

    @Test func repeatedOption_keepsTheLastValue() throws {
        let reader = try ArgumentReader(["--config", "default.json", "--config=mine.json"], options: ["--config"])
        #expect(reader.value("--config") == "mine.json")
    }

    @Test(arguments: [["--help"], ["-h"], ["x", "--help", "y"]])
    func help_isUnderstoodEverywhere(arguments: [String]) throws {
        #expect(try ArgumentReader(arguments, options: []).wantsHelp)
    }

    @Test func afterDoubleDash_everythingIsPositional() throws {
        let reader = try ArgumentReader(["--json", "--", "--json", "-h", "-"], options: [], flags: ["--json"])
        #expect(reader.positional == ["--json", "-h", "-"])
        #expect(!reader.wantsHelp)
    }

    @Test(arguments: [
        (["--bogus"], "unknown argument --bogus"),
        (["-x"], "unknown argument -x"),
        (["--config"], "--config: missing value"),
        (["--json=yes"], "--json: takes no value"),
    ])
    func mistakes_nameTheFlag(arguments: [String], message: String) {
        #expect {
            try ArgumentReader(arguments, options: ["--config"], flags: ["--json"])
        } throws: { error in
            (error as? UsageError)?.description == message
        }
    }

    @Test func convertedValue_refusedWithWhatWasExpected() throws {
        let reader = try ArgumentReader(["--port", "http"], options: ["--port"])
        #expect {
            try reader.value("--port", expecting: "a port", Int.init)
        } throws: { error in
            (error as? UsageError)?.description == "--port: expected a port, not http"
        }
        #expect(throws: UsageError.self) { try reader.required("--ca") }
        #expect {
            try ArgumentReader(["a.der", "b.der"], options: []).expectPositional(atMost: 1)
        } throws: { error in
            (error as? UsageError)?.description == "unexpected argument b.der"
        }
    }

    @Test(arguments: [
        ["--version"], ["version"], ["help"], ["help", "verify"], ["serve", "--help"], ["verify", "-h"],
        ["testing", "--help"], ["testing", "init-ca", "--help"], ["testing", "receipt", "--help"],
        ["testing", "transaction", "--help"], ["testing", "renewal-info", "--help"],
        ["testing", "app-transaction", "--help"], ["testing", "notification", "--help"], ["help", "testing"],
    ])
    func versionAndEveryHelp_exitZero(arguments: [String]) {
        #expect(runReceiptd(arguments) == ExitStatus.success)
    }
}
