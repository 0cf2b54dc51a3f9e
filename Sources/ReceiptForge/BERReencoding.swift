internal import CryptoFloor

/// Re-encodes a DER receipt the way Xcode writes receipts: indefinite lengths on the PKCS#7 structure and the
/// payload split into a chunked (constructed) OCTET STRING. Certificates and signer infos are kept byte for byte,
/// so the signature still verifies. For tests of the BER path.
public func indefiniteLengthReceipt(_ der: [UInt8], chunkSize: Int = 512) throws -> [UInt8] {
    let reader = ASN1Reader(der)
    func header(_ element: ASN1Element) -> UInt8 { reader.bytes[element.headerStart] }
    func indefinite(_ identifier: UInt8, _ content: [UInt8]) -> [UInt8] { [identifier, 0x80] + content + [0, 0] }

    // ContentInfo { OID, [0] { SignedData { version, digests, EncapsulatedContentInfo { OID, [0] { OCTET STRING } },
    // [0] certificates, signerInfos } } }
    let contentInfo = try reader.root()
    let contentInfoParts = try reader.children(of: contentInfo)
    let explicitSignedData = try reader.children(of: contentInfoParts[1])
    let signedData = explicitSignedData[0]
    var signedDataContent: [UInt8] = []
    for field in try reader.children(of: signedData) {
        guard field.isUniversal(ASN1Tag.sequence), !signedDataContent.isEmpty,
            let encapsulated = try? reader.children(of: field), encapsulated.count == 2, encapsulated[1].isContext(0)
        else {
            signedDataContent += reader.encoding(of: field)
            continue
        }
        let payload = try reader.octetString(try reader.children(of: encapsulated[1])[0])
        var chunks: [UInt8] = []
        var offset = 0
        repeat {
            let end = min(offset + chunkSize, payload.count)
            chunks += DERWriter.octetString(Array(payload[offset..<end]))
            offset = end
        } while offset < payload.count
        let chunked = indefinite(0x24, chunks)
        signedDataContent += indefinite(
            header(field), Array(reader.encoding(of: encapsulated[0])) + indefinite(header(encapsulated[1]), chunked))
    }
    return indefinite(
        header(contentInfo),
        Array(reader.encoding(of: contentInfoParts[0]))
            + indefinite(header(contentInfoParts[1]), indefinite(header(signedData), signedDataContent)))
}
