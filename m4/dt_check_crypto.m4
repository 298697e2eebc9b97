dnl OpenSSL libcrypto: HMAC-SHA256 webhook signatures and checkpoint checksums.
AC_DEFUN([DT_CHECK_CRYPTO], [DT_CHECK_LIB([crypto], [libcrypto], [openssl/hmac.h], [crypto], [HMAC], [no],
  [OpenSSL libcrypto prefix])])
