// libcurl's functions, looked up in libcurl.so.4 when the first etcd client is made (see CCurl.h
// for why it is not linked).
#include "CCurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

// The run-time library of Debian's libcurl4 (and of every distribution since libcurl 7.16.0):
// the soname the -dev package's libcurl.so points to.
#define OBS_CURL_LIBRARY "libcurl.so.4"

static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    CURLcode (*easy_pause)(CURL *handle, int bitmask);
    const char *(*easy_strerror)(CURLcode code);
    curl_version_info_data *(*version_info)(CURLversion version);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *multi);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *handle);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *queued);
    CURLMcode (*multi_socket_action)(CURLM *multi, curl_socket_t socket, int mask, int *running);
    CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *string);
    void (*slist_free_all)(struct curl_slist *list);
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_error;
static char load_message[512];

static int resolve(void *library, void **slot, const char *name) {
    *slot = dlsym(library, name);
    if (*slot) return 1;
    snprintf(load_message, sizeof load_message, "%s has no %s (libcurl too old?)", OBS_CURL_LIBRARY, name);
    load_error = load_message;
    return 0;
}

static void load(void) {
    // RTLD_LOCAL: libcurl's symbols (and OpenSSL's) stay out of the global namespace.
    void *library = dlopen(OBS_CURL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_message, sizeof load_message,
                 "cluster mode needs libcurl (Debian: apt-get install libcurl4), which could not be loaded: %s",
                 why ? why : OBS_CURL_LIBRARY);
        load_error = load_message;
        return;
    }
    // The library stays loaded for the life of the process: handles may be in use on any thread.
    if (!(resolve(library, (void **)&api.global_init, "curl_global_init")
          && resolve(library, (void **)&api.easy_init, "curl_easy_init")
          && resolve(library, (void **)&api.easy_cleanup, "curl_easy_cleanup")
          && resolve(library, (void **)&api.easy_pause, "curl_easy_pause")
          && resolve(library, (void **)&api.easy_strerror, "curl_easy_strerror")
          && resolve(library, (void **)&api.version_info, "curl_version_info")
          && resolve(library, (void **)&api.easy_setopt, "curl_easy_setopt")
          && resolve(library, (void **)&api.easy_getinfo, "curl_easy_getinfo")
          && resolve(library, (void **)&api.multi_init, "curl_multi_init")
          && resolve(library, (void **)&api.multi_cleanup, "curl_multi_cleanup")
          && resolve(library, (void **)&api.multi_add_handle, "curl_multi_add_handle")
          && resolve(library, (void **)&api.multi_remove_handle, "curl_multi_remove_handle")
          && resolve(library, (void **)&api.multi_info_read, "curl_multi_info_read")
          && resolve(library, (void **)&api.multi_socket_action, "curl_multi_socket_action")
          && resolve(library, (void **)&api.multi_setopt, "curl_multi_setopt")
          && resolve(library, (void **)&api.slist_append, "curl_slist_append")
          && resolve(library, (void **)&api.slist_free_all, "curl_slist_free_all"))) {
        return;
    }
    // Not thread-safe in older libcurls, hence inside the once.
    CURLcode code = api.global_init(CURL_GLOBAL_ALL);
    if (code != CURLE_OK) {
        snprintf(load_message, sizeof load_message, "libcurl could not be initialised: %s", api.easy_strerror(code));
        load_error = load_message;
    }
}

const char *obs_curl_load(void) {
    pthread_once(&load_once, load);
    return load_error;
}

CURL *obs_curl_easy_init(void) { return api.easy_init(); }
void obs_curl_easy_cleanup(CURL *handle) { api.easy_cleanup(handle); }
CURLcode obs_curl_easy_pause(CURL *handle, int bitmask) { return api.easy_pause(handle, bitmask); }
const char *obs_curl_easy_strerror(CURLcode code) { return api.easy_strerror(code); }

CURLcode obs_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return api.easy_setopt(handle, option, value);
}

CURLcode obs_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return api.easy_setopt(handle, option, value);
}

CURLcode obs_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return api.easy_setopt(handle, option, value);
}

CURLcode obs_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return api.easy_setopt(handle, option, value);
}

CURLcode obs_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return api.easy_setopt(handle, option, value);
}

CURLcode obs_curl_setopt_write_function(CURL *handle, curl_write_callback callback) {
    return api.easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode obs_curl_setopt_header_function(CURL *handle, curl_write_callback callback) {
    return api.easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

int obs_curl_has_http2(void) {
    curl_version_info_data *info = api.version_info(CURLVERSION_NOW);
    return info && (info->features & CURL_VERSION_HTTP2) != 0;
}

CURLcode obs_curl_setopt_sockopt_function(CURL *handle, curl_sockopt_callback callback) {
    return api.easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, callback);
}

CURLcode obs_curl_setopt_closesocket_function(CURL *handle, curl_closesocket_callback callback) {
    return api.easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, callback);
}

CURLcode obs_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return api.easy_getinfo(handle, info, value);
}

CURLcode obs_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return api.easy_getinfo(handle, info, value);
}

CURLcode obs_curl_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value) {
    return api.easy_getinfo(handle, info, value);
}

CURLM *obs_curl_multi_init(void) { return api.multi_init(); }
CURLMcode obs_curl_multi_cleanup(CURLM *multi) { return api.multi_cleanup(multi); }
CURLMcode obs_curl_multi_add_handle(CURLM *multi, CURL *handle) { return api.multi_add_handle(multi, handle); }
CURLMcode obs_curl_multi_remove_handle(CURLM *multi, CURL *handle) { return api.multi_remove_handle(multi, handle); }
CURLMsg *obs_curl_multi_info_read(CURLM *multi, int *queued) { return api.multi_info_read(multi, queued); }

CURLMcode obs_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int mask, int *running) {
    return api.multi_socket_action(multi, socket, mask, running);
}

CURLMcode obs_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return api.multi_setopt(multi, option, value);
}

CURLMcode obs_curl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return api.multi_setopt(multi, option, value);
}

CURLMcode obs_curl_multi_setopt_socket_function(CURLM *multi, curl_socket_callback callback) {
    return api.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
}

CURLMcode obs_curl_multi_setopt_timer_function(CURLM *multi, curl_multi_timer_callback callback) {
    return api.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
}

struct curl_slist *obs_curl_slist_append(struct curl_slist *list, const char *string) {
    return api.slist_append(list, string);
}

void obs_curl_slist_free_all(struct curl_slist *list) { api.slist_free_all(list); }
