// swift-tools-version:6.0
import PackageDescription

// Benchmarks live in their own package so that receiptd itself depends on nothing new: this one reaches the main
// package by path and links OpenSSL directly only to measure the floor and the naive PKCS7_verify beside receiptd.
let package = Package(
    name: "receiptd-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "receiptd", path: "..")],
    targets: [
        .systemLibrary(name: "CBenchOpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .executableTarget(
            name: "receipt-bench",
            dependencies: [
                "CBenchOpenSSL",
                .product(name: "ReceiptEngine", package: "receiptd"),
                .product(name: "ReceiptForge", package: "receiptd"),
                .product(name: "ReceiptService", package: "receiptd"),
                .product(name: "StoreKitJWS", package: "receiptd"),
                .product(name: "Ledger", package: "receiptd"),
                .product(name: "HTTP1Server", package: "receiptd"),
                .product(name: "JSONText", package: "receiptd"),
            ],
            // Without DWARF: swift-atomics' C shim (through swift-prometheus) carries DWARF 5 forms that Debian's
            // valgrind 3.19 cannot read, and callgrind gives up on the whole binary. Symbols stay, so profiles name
            // functions.
            linkerSettings: [
                .unsafeFlags(["-Xlinker", "--strip-debug"], .when(platforms: [.linux], configuration: .release))
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
