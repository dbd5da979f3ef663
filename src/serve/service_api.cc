// The API documents of bertfit serve (see service.h): the OpenAPI 3.0 document and the /docs
// page, both generated from route_table(), the table Service::handle dispatches on, so that
// every route served is documented and every documented route is served.
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/service.h"

namespace bertfit::serve {
namespace {

using nlohmann::json;

json ref(const std::string& name) { return {{"$ref", "#/components/schemas/" + name}}; }

// Schemas of the request bodies TEI 1.9 documents (the fields bertfit reads; others ignored).
json schemas() {
  const json text = {{"type", "string"}};
  const json ids = {{"type", "array"}, {"items", {{"type", "integer"}, {"minimum", 0}}}};
  const json text_or_ids = {{"oneOf", {text, ids}}};
  // A text, one list of token ids, or a batch of both.
  const json embed_input = {{"oneOf", {text, ids, {{"type", "array"}, {"items", text_or_ids}}}}};
  const json truncate = {{"type", "boolean"}, {"nullable", true}};
  const json direction = {{"type", "string"}, {"enum", {"right", "left"}}};
  const json prompt_name = {{"type", "string"}, {"nullable", true}};
  const json dimensions = {{"type", "integer"}, {"nullable", true}, {"minimum", 1}};
  const json texts = {{"type", "array"}, {"items", text}};
  json predict_input = {
      {"oneOf", {text, texts, {{"type", "array"}, {"items", {{"oneOf", {text, texts}}}}}}}};
  json s = {
      {"ErrorResponse",
       {{"type", "object"},
        {"required", {"error", "error_type"}},
        {"properties", {{"error", text}, {"error_type", text}}}}},
      {"PredictRequest",
       {{"type", "object"},
        {"required", {"inputs"}},
        {"properties",
         {{"inputs", predict_input},
          {"truncate", truncate},
          {"truncation_direction", direction},
          {"raw_scores", {{"type", "boolean"}, {"default", false}}},
          {"aggregation_strategy",
           {{"type", "string"}, {"enum", {"none", "simple", "first", "average", "max"}}}}}}}},
      {"EmbedRequest",
       {{"type", "object"},
        {"required", {"inputs"}},
        {"properties",
         {{"inputs", embed_input},
          {"normalize", {{"type", "boolean"}, {"default", true}}},
          {"truncate", truncate},
          {"truncation_direction", direction},
          {"prompt_name", prompt_name},
          {"dimensions", dimensions}}}}},
      {"EmbedAllRequest",
       {{"type", "object"},
        {"required", {"inputs"}},
        {"properties",
         {{"inputs", embed_input},
          {"truncate", truncate},
          {"truncation_direction", direction},
          {"prompt_name", prompt_name}}}}},
      {"SimilarityRequest",
       {{"type", "object"},
        {"required", {"inputs"}},
        {"properties",
         {{"inputs",
           {{"type", "object"},
            {"required", {"source_sentence", "sentences"}},
            {"properties", {{"source_sentence", text}, {"sentences", texts}}}}},
          {"parameters",
           {{"type", "object"},
            {"nullable", true},
            {"properties",
             {{"truncate", truncate},
              {"truncation_direction", direction},
              {"prompt_name", prompt_name}}}}}}}}},
      {"OpenAiEmbedRequest",
       {{"type", "object"},
        {"required", {"input"}},
        {"properties",
         {{"input", embed_input},
          {"model", {{"type", "string"}, {"nullable", true}}},
          {"encoding_format", {{"type", "string"}, {"enum", {"float", "base64"}}}},
          {"dimensions", dimensions}}}}},
      {"RerankRequest",
       {{"type", "object"},
        {"required", {"query", "texts"}},
        {"properties",
         {{"query", text},
          {"texts", texts},
          {"truncate", truncate},
          {"truncation_direction", direction},
          {"raw_scores", {{"type", "boolean"}, {"default", false}}},
          {"return_text", {{"type", "boolean"}, {"default", false}}}}}}},
      {"TokenizeRequest",
       {{"type", "object"},
        {"required", {"inputs"}},
        {"properties",
         {{"inputs", {{"oneOf", {text, texts}}}},
          {"add_special_tokens", {{"type", "boolean"}, {"default", true}}}}}}},
      {"DecodeRequest",
       {{"type", "object"},
        {"required", {"ids"}},
        {"properties",
         {{"ids", {{"oneOf", {ids, {{"type", "array"}, {"items", ids}}}}}},
          {"skip_special_tokens", {{"type", "boolean"}, {"default", true}}}}}}},
  };
  s["ModelRequest"] = {
      {"oneOf", {ref("EmbedRequest"), ref("RerankRequest"), ref("PredictRequest")}}};
  return s;
}

// "POST /embed_all" -> "post_embed_all"; "GET /" -> "get_root".
std::string operation_id(const Route& r) {
  std::string id;
  for (const char* c = r.method; *c != '\0'; ++c) {
    id += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  }
  std::string path = r.path;
  if (path == "/") path = "/root";
  for (char c : path) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return id;
}

std::string html_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string openapi_document(const std::string& version) {
  const json error = {{"content", {{"application/json", {{"schema", ref("ErrorResponse")}}}}}};
  json paths = json::object();
  for (const Route& r : route_table()) {
    json op = {{"summary", r.summary},
               {"operationId", operation_id(r)},
               {"tags", {"Text Embeddings Inference"}}};
    json responses = {{"200", {{"description", "Success"}}}};
    if (std::string(r.request_schema).empty()) {
      if (r.kind == RouteKind::kHealth) {
        responses["503"] = error;
        responses["503"]["description"] = "Unhealthy";
      }
    } else {
      op["requestBody"] = {
          {"required", true},
          {"content", {{"application/json", {{"schema", ref(r.request_schema)}}}}}};
      const std::pair<const char*, const char*> errors[] = {
          {"400", "Malformed request or empty batch"},
          {"413", "Batch or answer too large"},
          {"422", "Input validation or tokenization error"},
          {"424", "The model cannot serve this route, or inference failed"},
          {"429", "Model is overloaded"},
          {"503", "Waited too long in the queue, or shutting down"}};
      for (const auto& [status, description] : errors) {
        responses[status] = error;
        responses[status]["description"] = description;
      }
    }
    if (r.needs_key) {
      responses["401"] = error;
      responses["401"]["description"] = "Missing or wrong API key (when the server has one)";
      op["security"] = {{{"bearer", json::array()}}, json::object()};
    }
    op["responses"] = std::move(responses);
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[r.path][method] = std::move(op);
  }
  json doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "bertfit serve (Text Embeddings Inference's API)"},
        {"version", version},
        {"license", {{"name", "Apache-2.0"}}}}},
      {"paths", std::move(paths)},
      {"components",
       {{"schemas", schemas()},
        {"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
  };
  return doc.dump(2);
}

HttpResponse Service::docs_page() const {
  std::string page =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bertfit serve API</title>"
      "</head><body>\n<h1>bertfit serve " +
      html_escaped(info_.version) + ": " + html_escaped(served_model_name()) +
      "</h1>\n<p>The OpenAPI 3 document: <a href=\"/api-doc/openapi.json\">/api-doc/openapi.json"
      "</a>. Routes this model answers with a 424 are marked.</p>\n<table>\n"
      "<tr><th>Method</th><th>Path</th><th>Summary</th></tr>\n";
  for (const Route& r : route_table()) {
    const bool here = r.kind == RouteKind::kModel || serves(r.kind);
    page += "<tr><td>" + std::string(r.method) + "</td><td><code>" + html_escaped(r.path) +
            "</code></td><td>" + html_escaped(r.summary) +
            (here ? "" : " (424: not this model's task)") + "</td></tr>\n";
  }
  page += "</table>\n</body></html>\n";
  HttpResponse response;
  response.body = std::move(page);
  response.content_type = "text/html; charset=utf-8";
  return response;
}

}  // namespace bertfit::serve
