// OpenAI's audio route, registered by the server beside the completion routes.
#pragma once

#include "serve/http/router.h"

namespace kiln::serve {

struct RouteContext;

// POST /v1/audio/transcriptions, /audio/transcriptions (see routes_audio.cpp).
void add_audio_routes(http::Router& router, const RouteContext& rc);

}  // namespace kiln::serve
