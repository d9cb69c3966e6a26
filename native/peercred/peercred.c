/*
 * Peer credentials of a connected unix-domain socket, for Corral's egress proxy: Node has no
 * API for SO_PEERCRED. One function, peerCredentials(fd) -> { pid, uid, gid }, as the kernel
 * recorded them when the peer called connect(); the ids are those of the proxy's own user
 * namespace (a process in a child namespace shows with its mapped outer ids).
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <errno.h>
#include <string.h>
#if defined(__linux__) || defined(__APPLE__)
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#endif

static napi_value fail(napi_env env, const char *code, const char *message) {
  napi_throw_error(env, code, message);
  return NULL;
}

static napi_value set_int(napi_env env, napi_value obj, const char *name, int64_t value) {
  napi_value v;
  if (napi_create_int64(env, value, &v) != napi_ok || napi_set_named_property(env, obj, name, v) != napi_ok) return NULL;
  return obj;
}

static napi_value PeerCredentials(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "peerCredentials(fd): fd must be a non-negative integer");
    return NULL;
  }
  int64_t pid = -1, uid, gid;
#if defined(__linux__)
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return fail(env, "ERR_PEERCRED", strerror(errno));
  pid = cred.pid;
  uid = cred.uid;
  gid = cred.gid;
#elif defined(__APPLE__)
  uid_t u;
  gid_t g;
  if (getpeereid(fd, &u, &g) != 0) return fail(env, "ERR_PEERCRED", strerror(errno));
  uid = u;
  gid = g;
#else
  (void)pid;
  (void)uid;
  (void)gid;
  return fail(env, "ERR_PEERCRED_UNSUPPORTED", "peer credentials of unix sockets are not supported on this platform");
#endif
#if defined(__linux__) || defined(__APPLE__)
  napi_value obj;
  if (napi_create_object(env, &obj) != napi_ok) return NULL;
  if (!set_int(env, obj, "pid", pid) || !set_int(env, obj, "uid", uid) || !set_int(env, obj, "gid", gid)) return NULL;
  return obj;
#endif
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "peerCredentials", NAPI_AUTO_LENGTH, PeerCredentials, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "peerCredentials", fn) != napi_ok) return NULL;
  return exports;
}
