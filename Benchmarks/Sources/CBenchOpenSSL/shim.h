#ifndef RECEIPTD_BENCH_OPENSSL_SHIM_H
#define RECEIPTD_BENCH_OPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/rsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

// Macros and union fields that do not import into Swift.

static inline void bench_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
static inline X509 *bench_sk_X509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }
static inline void bench_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

/// The signed content of a PKCS7 signedData (borrowed from `p7`).
static inline const unsigned char *bench_p7_content(PKCS7 *p7, int *length) {
    ASN1_OCTET_STRING *data = p7->d.sign->contents->d.data;
    *length = data->length;
    return data->data;
}

/// The first SignerInfo (borrowed from `p7`).
static inline PKCS7_SIGNER_INFO *bench_p7_signer_info(PKCS7 *p7) {
    return sk_PKCS7_SIGNER_INFO_value(PKCS7_get_signer_info(p7), 0);
}

/// The signature bytes (borrowed from `info`).
static inline const unsigned char *bench_signature(PKCS7_SIGNER_INFO *info, int *length) {
    *length = info->enc_digest->length;
    return info->enc_digest->data;
}

/// The signed attributes as the DER SET the signature covers; 0 when there are none. Free `*out` with
/// bench_OPENSSL_free.
static inline int bench_signed_attributes(PKCS7_SIGNER_INFO *info, unsigned char **out) {
    if (sk_X509_ATTRIBUTE_num(info->auth_attr) <= 0) return 0;
    return ASN1_item_i2d((ASN1_VALUE *)info->auth_attr, out, ASN1_ITEM_rptr(PKCS7_ATTR_VERIFY));
}

/// The certificates a PKCS7 signedData carries (borrowed from `p7`).
static inline int bench_p7_certificate_count(PKCS7 *p7) { return sk_X509_num(p7->d.sign->cert); }
static inline X509 *bench_p7_certificate(PKCS7 *p7, int index) { return sk_X509_value(p7->d.sign->cert, index); }

/// EVP_RSA_gen and EVP_EC_gen are variadic macros, which Swift does not import.
static inline EVP_PKEY *bench_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
static inline EVP_PKEY *bench_ec_generate(const char *curve) { return EVP_EC_gen(curve); }

#endif
