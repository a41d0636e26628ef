// The server tests' HTTP client: cpp-httplib as Debian's libcpp-httplib-dev ships it (a header
// plus libcpp-httplib.so built with OpenSSL, zlib and Brotli support). Its classes change layout
// with those options, so every test includes httplib through this header, which matches the
// library's build (see cpp-httplib.pc: Cflags). Link: -lcpp-httplib. kiln's server does not use
// it: an independent client checks it.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT 1
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT 1
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT 1
#endif
#include <httplib.h>
