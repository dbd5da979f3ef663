// `bertfit report` and `train --report-to tensorboard` through the binary: a short run writes
// TensorBoard event files whose scalars equal metrics.jsonl's values under Trainer's tag names
// (read back with every CRC checked); the report page is self-contained, and headless Chromium
// renders it without console errors into a screenshot that shows the curves (decoded here: the
// loss curve's colour is on the page, and the page is not blank). Skipped with a message where
// Chromium is missing (scripts/setup.sh installs it for the test suite).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "report/tensorboard.h"

namespace bertfit::testing {
namespace {

using nlohmann::json;

// A decoded 8-bit RGB or RGBA PNG (what Chromium's screenshots are).
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<std::uint8_t> pixels;  // rows of width × channels bytes
};

std::uint32_t be32(const std::string& s, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

// PNG (RFC 2083): the IHDR, the concatenated IDAT zlib stream, then each row's filter undone.
Image decode_png(const std::string& file) {
  Image img;
  if (file.size() < 8 || file.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return img;
  std::string idat;
  int depth = 0, colour = 0;
  for (std::size_t at = 8; at + 12 <= file.size();) {
    const std::uint32_t length = be32(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (type == "IHDR") {
      img.width = static_cast<int>(be32(file, at + 8));
      img.height = static_cast<int>(be32(file, at + 12));
      depth = static_cast<unsigned char>(file[at + 16]);
      colour = static_cast<unsigned char>(file[at + 17]);
    } else if (type == "IDAT") {
      idat += file.substr(at + 8, length);
    }
    at += 12 + length;
  }
  if (depth != 8 || (colour != 2 && colour != 6)) return Image{};
  img.channels = colour == 6 ? 4 : 3;
  const std::size_t stride = static_cast<std::size_t>(img.width) * img.channels;
  std::vector<std::uint8_t> raw((stride + 1) * img.height);
  uLongf size = raw.size();
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      size != raw.size()) {
    return Image{};
  }
  img.pixels.assign(stride * img.height, 0);
  const int bpp = img.channels;
  for (int y = 0; y < img.height; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* out = &img.pixels[y * stride];
    const std::uint8_t* up = y > 0 ? &img.pixels[(y - 1) * stride] : nullptr;
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<std::size_t>(bpp) ? out[x - bpp] : 0;
      const int b = up ? up[x] : 0;
      const int c = up && x >= static_cast<std::size_t>(bpp) ? up[x - bpp] : 0;
      int predictor = 0;
      switch (filter) {
        case 1:
          predictor = a;
          break;
        case 2:
          predictor = b;
          break;
        case 3:
          predictor = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          break;
      }
      out[x] = static_cast<std::uint8_t>(in[x] + predictor);
    }
  }
  return img;
}

bool have_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

// One short run for the suite: 30 steps, logged every 5, evaluated every 10, with TensorBoard.
struct Run {
  TempDir tmp;
  std::string dir = tmp / "run";
  RunResult result;
  Run() {
    init_tiny_model(tmp / "model");
    result = run_bertfit("train --model " + (tmp / "model") + " --output " + dir +
                         " --task mrpc --data " + shared_dir() +
                         "/data/glue/MRPC --max-steps 30 --batch-size 8 --max-seq-len 64 "
                         "--log-every 5 --eval-every 10 --lr 1e-3 --report-to tensorboard");
  }
};

Run& run() {
  static Run r;
  return r;
}

std::vector<json> metrics_records(const std::string& dir) {
  std::vector<json> out;
  std::istringstream in(read_text(dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

TEST(ReportCli, TensorBoardScalarsEqualTheMetricsUnderTrainersTags) {
  ASSERT_EQ(run().result.exit_code, 0) << run().result.err;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(run().dir + "/runs")) {
    files.push_back(e.path().string());
  }
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("events.out.tfevents."), std::string::npos);
  const report::EventFile f = report::read_event_file(files[0]);
  EXPECT_EQ(f.file_version, "brain.Event:2");
  auto value = [&](const std::string& tag, std::int64_t step) -> double {
    for (const auto& s : f.scalars) {
      if (s.tag == tag && s.step == step) return s.value;
    }
    return NAN;
  };
  int steps = 0, evals = 0;
  for (const json& r : metrics_records(run().dir)) {
    if (r.contains("split")) {
      ++evals;
      const auto step = r["step"].get<std::int64_t>();
      EXPECT_FLOAT_EQ(value("eval/loss", step), r["eval_loss"].get<float>());
      EXPECT_FLOAT_EQ(value("eval/accuracy", step), r["eval_accuracy"].get<float>());
      EXPECT_FLOAT_EQ(value("eval/f1", step), r["eval_f1"].get<float>());
    } else if (r.contains("lr")) {
      ++steps;
      const auto step = r["step"].get<std::int64_t>();
      EXPECT_FLOAT_EQ(value("train/loss", step), r["loss"].get<float>());
      EXPECT_FLOAT_EQ(value("train/learning_rate", step), r["lr"].get<float>());
      EXPECT_FLOAT_EQ(value("train/epoch", step), r["epoch"].get<float>());
    }
  }
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(evals, 3);
  EXPECT_FALSE(std::isnan(value("train/train_runtime", 30)));
}

TEST(ReportCli, ThePageRendersInHeadlessChromium) {
  ASSERT_EQ(run().result.exit_code, 0) << run().result.err;
  RunResult r = run_bertfit("report " + run().dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page_path = run().dir + "/report.html";
  EXPECT_EQ(r.out, page_path + "\n");
  const std::string page = read_text(page_path);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);  // nothing loaded from elsewhere
  EXPECT_NE(page.find("best: step"), std::string::npos);
  EXPECT_NE(page.find("Settings"), std::string::npos);
  TempDir tmp;
  r = run_bertfit("report " + run().dir + " --output " + (tmp / "elsewhere.html"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(tmp / "elsewhere.html"), page);

  if (!have_chromium()) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it): the page was "
                    "checked as text only";
  }
  const std::string shot = tmp / "shot.png", log = tmp / "chromium.log";
  const std::string command =
      "timeout 120 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars "
      "--user-data-dir=" +
      (tmp / "profile") +
      " --window-size=1200,1400 --enable-logging=stderr --v=0 --screenshot=" + shot + " file://" +
      page_path + " >" + log + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_text(log);
  const std::string chromium_log = read_text(log);
  EXPECT_EQ(chromium_log.find(":CONSOLE"), std::string::npos) << chromium_log;
  const Image img = decode_png(read_text(shot));
  ASSERT_EQ(img.width, 1200);
  ASSERT_EQ(img.height, 1400);
  long ink = 0, loss_colour = 0;
  for (std::size_t i = 0; i + img.channels <= img.pixels.size(); i += img.channels) {
    const int R = img.pixels[i], G = img.pixels[i + 1], B = img.pixels[i + 2];
    if (R < 200 || G < 200 || B < 200) ++ink;
    // The training loss and learning-rate lines (#1f77b4), anti-aliased.
    if (std::abs(R - 0x1f) < 24 && std::abs(G - 0x77) < 24 && std::abs(B - 0xb4) < 24) {
      ++loss_colour;
    }
  }
  const long total = static_cast<long>(img.width) * img.height;
  EXPECT_GT(ink, total / 100) << "the page looks blank";
  EXPECT_GT(loss_colour, 200) << "no curve in the loss colour";
}

TEST(ReportCli, Errors) {
  TempDir tmp;
  RunResult r = run_bertfit("report " + (tmp / "nothing"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("metrics.jsonl"), std::string::npos) << r.err;
  r = run_bertfit("report");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("run_dir"), std::string::npos) << r.err;
  init_tiny_model(tmp / "model");
  r = run_bertfit("train --model " + (tmp / "model") + " --output " + (tmp / "out") +
                  " --task mrpc --data " + shared_dir() +
                  "/data/glue/MRPC --max-steps 1 --report-to wandb");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--report-to"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tensorboard"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertfit::testing
