// llama-server's native completion route, registered by add_completion_routes.
#pragma once

#include "serve/http/router.h"

namespace kiln::serve {

struct RouteContext;

// POST /completion (llama-server's field names and response; see routes_native.cpp).
void add_native_completion_routes(http::Router& router, const RouteContext& rc);

}  // namespace kiln::serve
