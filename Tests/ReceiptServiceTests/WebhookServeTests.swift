import Dispatch
import Foundation
import Testing

@testable import ReceiptService
@testable import receiptd

/// `serve` with `webhooks`: what stops it at start, and a dispatcher that starts and stops with it.
@Suite(.serialized)
struct WebhookServeTests {
    static let webhook = #"{"name": "backend", "url": "https://hooks.example.com/e", "secret_file": "backend.secret"}"#

    @Test func webhooksWithoutAStore_stopServeAtStart_sayingWhy() throws {
        let folder = try ScratchFolder()
        try folder.write("backend.secret", "whsec_x\n")
        let config = try folder.write("receiptd.json", #"{"port": 0, "webhooks": [\#(Self.webhook)]}"#)
        let errors = CapturedLines()
        let output = CapturedLines()
        let status = runServe(arguments: ["--config", config], environment: [:], output: output.sink, errors: errors.sink)
        #expect(status == 1)
        #expect(errors.all.count == 1)
        #expect(errors.all.first?.contains("webhooks: 1 configured but there is no store") == true)
        #expect(output.all.isEmpty)
    }

    @Test func aMissingSecretFile_stopsServeAtStart_namingTheFile() throws {
        let folder = try ScratchFolder()
        let config = try folder.write(
            "receiptd.json", #"{"port": 0, "store": {"sqlite": "ledger.sqlite"}, "webhooks": [\#(Self.webhook)]}"#)
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", config], environment: [:], output: CapturedLines().sink, errors: errors.sink)
        #expect(status == 1)
        #expect(errors.all.first?.contains("webhooks[0].secret_file: cannot read \(folder.path)/backend.secret") == true)
    }

    @Test func serveWithAStore_startsTheDispatcher_andStopsCleanly() throws {
        let folder = try ScratchFolder()
        try folder.write("backend.secret", "whsec_never-logged\n")
        let config = try folder.write(
            "receiptd.json", #"{"port": 0, "store": {"sqlite": "ledger.sqlite"}, "webhooks": [\#(Self.webhook)]}"#)
        let output = CapturedLines()
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", config], environment: [:], output: output.sink, errors: errors.sink,
            started: { shutDown in DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { shutDown() } })
        #expect(status == 0)
        #expect(errors.all.isEmpty)
        #expect(output.all.contains { $0.contains(" webhook name=backend ") })
        #expect(output.all.last?.contains("stopped") == true)
        #expect(!output.all.contains { $0.contains("whsec_never-logged") })
    }

    @Test func checkConfig_acceptsWebhooksWithAStore_andRefusesThemWithout() throws {
        let folder = try ScratchFolder()
        try folder.write("backend.secret", "whsec_x\n")
        let good = try folder.write(
            "good.json", #"{"store": {"sqlite": "ledger.sqlite"}, "webhooks": [\#(Self.webhook)]}"#)
        let storeless = try folder.write("storeless.json", #"{"webhooks": [\#(Self.webhook)]}"#)
        #expect(runReceiptd(["check-config", "--config", good]) == ExitStatus.success)
        #expect(runReceiptd(["check-config", "--config", storeless]) == ExitStatus.failure)
    }
}
