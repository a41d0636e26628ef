// Images and audio in completion requests, for a server started with an mmproj (`kiln serve
// --mmproj`): OpenAI's content parts {"type": "image_url", "image_url": {"url":
// "data:image/png;base64,..."}} and {"type": "input_audio", "input_audio": {"data": BASE64,
// "format": "wav"}} (WAV, FLAC or MP3, told apart by their bytes; data: URIs are read too), and
// llama-server's prompt object {"prompt_string": "...<__media__>...", "multimodal_data":
// ["<base64>", ...]} on /completion and /v1/completions.
//
// Each image is decoded, prepared and encoded on the request's thread, before the request is
// queued: a bad image is a 400 naming the problem, and the engine only decodes embeddings. The
// encoder takes turns with the engine on the one compute arena and keeps embeddings by content,
// so a conversation that sends the same image every turn encodes it once. data: URLs are read, and
// file:// URLs from the --media-path folder (media_file.h); remote URLs are refused (kiln fetches
// nothing on a client's behalf).
//
// Thread-safety: reentrant; the encoder serializes encodes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/media_prompt.h"
#include "serve/api_json.h"
#include "serve/engine.h"
#include "serve/server_state.h"

namespace kiln::serve {

// The image an image_url part's url carries (a data: URL, or a file:// URL under --media-path);
// `index` counts the request's images from 0 for errors. A 400 without --mmproj, for other URLs,
// for files media_file.h refuses and for bad images.
std::optional<HttpError> read_image_url(const ServerState& st, std::string_view url, size_t index,
                                        std::shared_ptr<const PreparedImage>& out);

// One media content part of a chat message (in the message's order).
struct MediaPart {
  bool audio = false;
  std::string data;  // an image_url part's url, or an input_audio part's data
};

// The audio an input_audio part's data carries (base64, or a data: URI), cut into the audio
// encoder's chunks; `index` counts the request's audio parts from 0 for errors. A 400 without an
// mmproj with an audio encoder, and for bad or too long audio.
std::optional<HttpError> read_audio_data(const ServerState& st, std::string_view data, size_t index,
                                         std::vector<std::shared_ptr<const PreparedAudio>>& out);

// Tokenizes `text`, whose media markers stand for `media` in order (images and audio), encodes
// them and fills out.prompt and out.images (every run of media embeddings, audio chunks included);
// errors as for images below, and a 400 for audio without an audio encoder.
std::optional<HttpError> media_prompt_request(const ServerState& st, const std::string& text,
                                              std::span<const MediaItem> media, bool collapse_bos,
                                              GenerationRequest& out);

// Tokenizes `text`, whose media markers stand for `images` in order, as libmtmd does (special
// tokens parsed), encodes the images and fills out.prompt (kMediaToken at image positions) and
// out.images. `collapse_bos`: a chat prompt whose template wrote BOS. A 400 when markers and
// images differ in number or an image does not fit a micro-batch; a 500 when encoding fails.
std::optional<HttpError> media_prompt_request(const ServerState& st, const std::string& text,
                                              std::span<const std::shared_ptr<const PreparedImage>> images,
                                              bool collapse_bos, GenerationRequest& out);

// A prompt field that is llama-server's object form {"prompt_string", "multimodal_data"}:
// tokenized (with its images) into `out`; nullopt and `handled` false when `value` is not an
// object (the caller parses it as a plain prompt).
std::optional<HttpError> parse_prompt_object(const ServerState& st, const json& value, const char* field,
                                             GenerationRequest& out, bool& handled);

}  // namespace kiln::serve
