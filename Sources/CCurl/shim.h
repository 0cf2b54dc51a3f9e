#ifndef RECEIPTD_CCURL_SHIM_H
#define RECEIPTD_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call; one typed wrapper per argument kind.

typedef size_t (*receiptd_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode receiptd_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_setopt_callback(CURL *handle, CURLoption option, receiptd_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode receiptd_curl_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

#endif
