// swift-tools-version:6.0
import PackageDescription

// One place for the language settings of every target: Swift 6 mode with complete strict concurrency.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "receiptd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "receiptd", targets: ["receiptd"]),
        .library(name: "ReceiptEngine", targets: ["ReceiptEngine"]),
        .library(name: "ReceiptForge", targets: ["ReceiptForge"]),
        // For the Benchmarks package, which times the ledger's cost beside stateless answers.
        .library(name: "Ledger", targets: ["Ledger"]),
        .library(name: "JSONText", targets: ["JSONText"]),
        .library(name: "StoreKitJWS", targets: ["StoreKitJWS"]),
        .library(name: "HTTP1Server", targets: ["HTTP1Server"]),
        // For the separate Benchmarks/ package, which times validation together with the JSON answer.
        .library(name: "ReceiptService", targets: ["ReceiptService"]),
        .library(name: "AppStoreServerAPI", targets: ["AppStoreServerAPI"]),
    ],
    dependencies: [
        // The executable's command line: commands, help, usage errors and shell completion from declarations.
        .package(url: "https://github.com/apple/swift-argument-parser", .upToNextMinor(from: "1.8.2")),
        // `/metrics`: swift-prometheus's counters, gauges and histograms (swift-metrics handlers) and its rendering of
        // them, the exposition Prometheus' own parser reads. swift-metrics comes with it and is pinned here so that
        // neither moves past a minor version unseen. Neither pulls in SwiftNIO.
        .package(url: "https://github.com/apple/swift-metrics.git", .upToNextMinor(from: "2.13.0")),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", .upToNextMinor(from: "2.4.1")),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // The only importer of COpenSSL: X.509, chains with Apple's markers, signatures, digests, ASN.1, and the
        // signing the forge needs (package access). Nothing above it sees an OpenSSL type.
        .target(name: "CryptoFloor", dependencies: ["COpenSSL"], swiftSettings: strictSettings),
        // Decode, verify and check App Store receipts (pure Swift over the floor). Knows nothing of HTTP.
        .target(name: "ReceiptEngine", dependencies: ["CryptoFloor"], swiftSettings: strictSettings),
        // Test PKIs and forged receipts for `receiptd testing`, tests, fuzzing and benchmarks; nothing that
        // validates depends on it.
        .target(
            name: "ReceiptForge", dependencies: ["CryptoFloor", "ReceiptEngine", "JSONText"], swiftSettings: strictSettings),
        // Verify StoreKit 2 signed data and App Store Server Notifications V2 (pure Swift over the floor, with the
        // engine's trust model and checks). Knows nothing of HTTP, nor of JSON answers: JSONText only parses payloads.
        .target(
            name: "StoreKitJWS", dependencies: ["CryptoFloor", "ReceiptEngine", "JSONText"], swiftSettings: strictSettings),
        // JSON values that keep member order, with a strict parser and a compact or pretty writer.
        .target(name: "JSONText", swiftSettings: strictSettings),
        // epoll and eventfd, which Swift's Glibc module leaves out; only HTTP1Server imports it.
        .systemLibrary(name: "CEpoll"),
        // A small HTTP/1.1 server on POSIX sockets, epoll and Dispatch. Knows nothing of receipts.
        .target(name: "HTTP1Server", dependencies: ["CEpoll"], swiftSettings: strictSettings),
        // Routes, configuration and JSON: joins the engine to the HTTP server.
        .target(
            name: "ReceiptService",
            dependencies: [
                "CryptoFloor", "ReceiptEngine", "StoreKitJWS", "Ledger", "JSONText", "HTTP1Server", "AppStoreServerAPI",
                // Prometheus's counters, gauges and histograms are swift-metrics' CoreMetrics handlers.
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings),
        // Every command (`serve`, `verify`, `testing`) and its flags; the modules below know nothing of a command line.
        .executableTarget(
            name: "receiptd",
            dependencies: [
                "ReceiptService", "CryptoFloor", "ReceiptEngine", "StoreKitJWS", "Ledger", "ReceiptForge", "JSONText", "HTTP1Server",
                "AppStoreServerAPI", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings,
            // A release build's DWARF is 4 MB of the static binary (SwiftPM compiles release with -g); the symbol table
            // stays, so backtraces and profilers still name functions. Identical functions whose address is never taken
            // (specializations that compiled to the same code) are kept once: 0.2 MB. Tests/e2e/test-docker-files.sh
            // bounds the size.
            linkerSettings: [
                .unsafeFlags(["-Xlinker", "--strip-debug", "-Xlinker", "--icf=safe"], .when(platforms: [.linux], configuration: .release))
            ]
        ),
        // libFuzzer targets (see scripts/fuzz-smoke); a plain build links them as programs that do nothing.
        .executableTarget(name: "FuzzReceipt", dependencies: ["ReceiptEngine", "ReceiptForge"], path: "Fuzz/FuzzReceipt", swiftSettings: strictSettings),
        .executableTarget(
            name: "FuzzJWS", dependencies: ["StoreKitJWS", "ReceiptEngine", "ReceiptForge", "JSONText", "ReceiptService"],
            path: "Fuzz/FuzzJWS",
            swiftSettings: strictSettings),
        .executableTarget(name: "FuzzHTTPRequest", dependencies: ["HTTP1Server"], path: "Fuzz/FuzzHTTPRequest", swiftSettings: strictSettings),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        // A client of Apple's App Store Server API: the only importer of CCurl. Signs its tokens on the crypto floor
        // and returns Apple's signed strings unverified; the service verifies them like any other JWS.
        .target(name: "AppStoreServerAPI", dependencies: ["CCurl", "CryptoFloor", "JSONText"], swiftSettings: strictSettings),
        // The purchase ledger on SQLite or PostgreSQL; the only importer of CSQLite and CPostgres. Knows nothing of
        // receipts, JWS or HTTP: the service maps verified data into its value types. JSONText reads back payloads it
        // stored, when a migration adds a column for a field they always held.
        .target(name: "Ledger", dependencies: ["CSQLite", "CPostgres", "JSONText"], swiftSettings: strictSettings),
        // What every test target shares: the test PKIs, the Apple fixtures, the live-server clients and the
        // PostgreSQL cluster and ledger fixtures. A plain target, so it does not import Testing.
        .target(
            name: "TestSupport",
            dependencies: ["ReceiptEngine", "ReceiptForge", "StoreKitJWS", "JSONText", "HTTP1Server", "Ledger", "AppStoreServerAPI"],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ReceiptEngineTests", dependencies: ["CryptoFloor", "ReceiptEngine", "ReceiptForge", "TestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "StoreKitJWSTests",
            // ReceiptService for the JSON answer, whose writer lives there.
            dependencies: [
                "StoreKitJWS", "CryptoFloor", "ReceiptEngine", "ReceiptForge", "JSONText", "ReceiptService", "TestSupport",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "HTTP1ServerTests", dependencies: ["HTTP1Server", "TestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "LedgerTests", dependencies: ["Ledger", "TestSupport"], swiftSettings: strictSettings),
        // Also tests the executable's commands (`@testable import receiptd`): serve live, flags, config resolution.
        .testTarget(
            name: "ReceiptServiceTests",
            dependencies: [
                "ReceiptService", "ReceiptEngine", "ReceiptForge", "StoreKitJWS", "Ledger", "JSONText", "HTTP1Server",
                "receiptd", "TestSupport", "AppStoreServerAPI", "CryptoFloor",
                // The webhook dispatcher's tests read its metrics from a registry of their own.
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AppStoreServerAPITests",
            dependencies: ["AppStoreServerAPI", "CryptoFloor", "JSONText", "TestSupport"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
