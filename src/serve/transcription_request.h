// POST /v1/audio/transcriptions' form (OpenAI's fields: file, model, language, prompt,
// temperature, response_format, stream, max_tokens) as the one-message chat completion body
// llama-server builds for it (ref: llama.cpp tools/server convert_transcriptions_to_chatcmpl):
// one user message whose text is the prompt (default "Transcribe audio to text"), with
// " (language: L)" when a language is given, then the audio's media marker. The audio travels as
// that message's input_audio part, so the chat route's code reads and encodes it. Every bad field
// is a 400 naming it. Stateless; safe from any thread.
#pragma once

#include <optional>
#include <span>

#include "serve/api_json.h"
#include "serve/http/multipart.h"

namespace kiln::serve {

struct TranscriptionRequest {
  json chat;                 // the chat completion body: messages, model, stream, temperature, max_tokens
  bool text_format = false;  // response_format "text": the answer is the text alone, text/plain
  bool stream = false;       // answered as transcript.text.delta events, then transcript.text.done
};

// The request of a transcription form. A 400 without a `file` part, for a field given twice, a
// temperature or max_tokens that is not a number, a stream that is not true or false, and a
// response_format other than json and text (srt, vtt and verbose_json carry timestamps, which
// kiln does not make), text with stream, or timestamp_granularities.
std::optional<HttpError> transcription_request(std::span<const http::FormPart> form,
                                               TranscriptionRequest& out);

}  // namespace kiln::serve
