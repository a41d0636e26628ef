// The image routes, registered by the server beside the completion routes: OpenAI's
// (routes_images.cpp) and A1111's as stable-diffusion.cpp's server serves them (routes_sdapi.cpp).
// Both run their requests through run_image_request on the server's ImageModels.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "serve/api_json.h"
#include "serve/http/router.h"
#include "serve/image_request.h"

namespace kiln::serve {

struct RouteContext;

// POST /v1/images/generations, /v1/images/edits.
void add_image_routes(http::Router& router, const RouteContext& rc);
// POST /sdapi/v1/txt2img, /sdapi/v1/img2img, /sdapi/v1/interrupt; GET /sdapi/v1/samplers,
// /schedulers, /sd-models, /options, /progress.
void add_sdapi_routes(http::Router& router, const RouteContext& rc);

// Runs `request` on its image model (empty: the server's first), the job cancelled when the
// client of `ex` goes: the encoded images in batch order, or the error to answer (400 for a text
// model or a server without image models, ImageModels::run's otherwise).
std::variant<std::vector<std::vector<uint8_t>>, HttpError> run_image_request(const RouteContext& rc,
                                                                            ImageRequest& request,
                                                                            http::Exchange& ex);

}  // namespace kiln::serve
