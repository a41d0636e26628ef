// llama-server's native completion route, registered by add_completion_routes.
#pragma once

namespace httplib {
class Server;
}

namespace kiln::serve {

struct RouteContext;

// POST /completion (llama-server's field names and response; see routes_native.cpp).
void add_native_completion_routes(httplib::Server& http, const RouteContext& rc);

}  // namespace kiln::serve
