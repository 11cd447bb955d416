// prepare_shards (wte/data.h): text files, directories and globs, plain or gzip, tokenized in
// parallel into llm.c shards with the ids of the single-threaded tokenizer.
#include <glob.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "wte/data.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// The input files, in order: each argument expanded (a directory recursively, a glob's
// matches), sorted by name within the argument.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::vector<std::string> found;
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      for (auto it = fs::recursive_directory_iterator(in, ec); !ec && it != fs::end(it);
           it.increment(ec))
        if (it->is_regular_file(ec)) found.push_back(it->path().string());
      if (ec) throw Error("input directory '" + in + "': cannot list it: " + ec.message());
      if (found.empty()) throw Error("input directory '" + in + "' holds no file");
    } else if (in.find_first_of("*?[") != std::string::npos && !fs::exists(in, ec)) {
      glob_t g{};
      const int rc = ::glob(in.c_str(), GLOB_ERR, nullptr, &g);
      if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i)
          if (fs::is_regular_file(g.gl_pathv[i], ec)) found.emplace_back(g.gl_pathv[i]);
      globfree(&g);
      if (found.empty()) throw Error("input pattern '" + in + "' matches no file");
    } else {
      if (!fs::is_regular_file(in, ec))
        throw Error("input '" + in + "' is not a file, a directory or a pattern that matches files" +
                    (fs::exists(in, ec) ? "" : " (it does not exist)"));
      found.push_back(in);
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

// One split's text on its way to shards: the documents appended, cut into tasks at safe points.
struct SplitText {
  std::string pending;       // text not yet handed to a task
  size_t documents = 0;
};

struct Task {
  int split;                 // 0 train, 1 val
  std::string text;
  std::vector<int32_t> ids;
};

// One split's shards, rolled every shard_tokens tokens.
class ShardSeries {
 public:
  ShardSeries(std::string dir, std::string name, ShardFormat fmt, size_t shard_tokens,
              std::vector<std::string>* written)
      : dir_(std::move(dir)), name_(std::move(name)), fmt_(fmt), per_shard_(shard_tokens),
        written_(written) {}
  void append(const int32_t* ids, size_t n) {
    while (n > 0) {
      if (!writer_) {
        char file[64];
        std::snprintf(file, sizeof file, "%s_%06zu.bin", name_.c_str(), paths_.size());
        paths_.push_back((fs::path(dir_) / file).string());
        writer_ = std::make_unique<ShardWriter>(paths_.back(), fmt_);
      }
      const size_t take = std::min(n, per_shard_ - writer_->count());
      writer_->append(ids, take);
      tokens_ += take;
      ids += take;
      n -= take;
      if (writer_->count() == per_shard_) close();
    }
  }
  void close() {
    if (!writer_) return;
    written_->push_back(paths_.back());
    writer_->finish();
    writer_.reset();
  }
  const std::vector<std::string>& paths() const { return paths_; }
  size_t tokens() const { return tokens_; }

 private:
  std::string dir_, name_;
  ShardFormat fmt_;
  size_t per_shard_;
  std::vector<std::string>* written_;
  std::unique_ptr<ShardWriter> writer_;
  std::vector<std::string> paths_;
  size_t tokens_ = 0;
};

// Reads the inputs document by document and deals each document's text into its split.
class DocumentReader {
 public:
  DocumentReader(double val_fraction, SplitText* splits) : f_(val_fraction), splits_(splits) {}
  // Feeds the bytes of one file, in pieces; end_file() after its last piece.
  void feed(const char* p, size_t n) {
    size_t pos = 0;
    while (pos < n) {
      const char* nl = static_cast<const char*>(std::memchr(p + pos, '\n', n - pos));
      const size_t end = nl != nullptr ? static_cast<size_t>(nl - p) : n;
      line_.append(p + pos, end - pos);
      pos = end;
      if (nl == nullptr) break;
      end_line();
      ++pos;
    }
  }
  void end_file() {
    if (!line_.empty()) end_line();
    in_doc_ = nullptr;
  }
  size_t documents() const { return docs_; }

 private:
  // A line is blank when empty or "\r" (as split_documents); a document keeps its lines joined
  // by "\n", and documents of one split are joined by "\n\n".
  void end_line() {
    const bool blank = line_.empty() || line_ == "\r";
    if (blank) {
      in_doc_ = nullptr;
    } else {
      if (in_doc_ == nullptr) {
        const size_t i = docs_++;
        const bool val = std::floor((i + 1) * f_) > std::floor(i * f_);
        in_doc_ = &splits_[val ? 1 : 0];
        if (in_doc_->documents++ > 0) in_doc_->pending += "\n\n";
      } else {
        in_doc_->pending += '\n';
      }
      in_doc_->pending += line_;
    }
    line_.clear();
  }
  double f_;
  SplitText* splits_;
  SplitText* in_doc_ = nullptr;
  std::string line_;
  size_t docs_ = 0;
};

// Encodes tasks on `threads` threads, each with its own cache; returns when all are done.
void encode_tasks(const Tokenizer& tok, std::vector<Task>& tasks, std::vector<EncodeCache>& caches) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&](size_t w) {
    try {
      for (size_t i = next++; i < tasks.size(); i = next++) {
        tasks[i].ids.clear();
        tok.encode_append(tasks[i].text, caches[w], tasks[i].ids);
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      failure = std::current_exception();
      next = tasks.size();
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < caches.size(); ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

PrepareSummary prepare_shards(const Tokenizer& tokenizer, const PrepareOptions& opts) {
  if (opts.threads == 0) throw Error("prepare: threads must be at least 1");
  if (opts.shard_tokens == 0 || opts.shard_tokens > kShardMaxTokens)
    throw Error("prepare: shard_tokens = " + std::to_string(opts.shard_tokens) +
                " is outside [1, " + std::to_string(kShardMaxTokens) + "]");
  if (!(opts.val_fraction > 0.0 && opts.val_fraction < 1.0))
    throw Error("prepare: val_fraction = " + std::to_string(opts.val_fraction) +
                " is outside (0, 1)");
  const std::vector<std::string> files = expand_inputs(opts.inputs);
  std::error_code ec;
  fs::create_directories(opts.out_dir, ec);
  if (!fs::is_directory(opts.out_dir, ec))
    throw Error("output directory '" + opts.out_dir + "' cannot be created or is not a directory");
  for (const auto& e : fs::directory_iterator(opts.out_dir))
    if (e.path().extension() == ".bin")
      throw Error("output directory '" + opts.out_dir + "' already holds " +
                  e.path().filename().string() + ": give an empty or new directory (a glob of its "
                  "shards would mix two corpora)");
  size_t input_total = 0;
  for (const std::string& f : files) input_total += fs::file_size(f, ec);

  PrepareSummary sum;
  sum.files = files.size();
  sum.format = shard_format_for(tokenizer.size());
  std::vector<std::string> written;
  SplitText splits[2];
  ShardSeries series[2] = {
      ShardSeries(opts.out_dir, "train", sum.format, opts.shard_tokens, &written),
      ShardSeries(opts.out_dir, "val", sum.format, opts.shard_tokens, &written)};
  DocumentReader reader(opts.val_fraction, splits);
  std::vector<EncodeCache> caches(opts.threads);
  size_t input_done = 0;
  auto last_report = std::chrono::steady_clock::now();
  auto report = [&](bool force) {
    if (!opts.progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_report < std::chrono::milliseconds(500)) return;
    last_report = now;
    opts.progress(sum.text_bytes, input_done, input_total, series[0].tokens() + series[1].tokens());
  };
  // Tasks of the batch being encoded, and the next batch being read meanwhile.
  std::vector<Task> encoding, reading;
  std::thread worker;
  std::exception_ptr encode_failure;
  auto finish_batch = [&]() {
    if (worker.joinable()) worker.join();
    if (encode_failure) std::rethrow_exception(encode_failure);
    for (const Task& t : encoding) series[t.split].append(t.ids.data(), t.ids.size());
    encoding.clear();
  };
  auto start_batch = [&]() {
    finish_batch();
    std::swap(encoding, reading);
    worker = std::thread([&] {
      try {
        encode_tasks(tokenizer, encoding, caches);
      } catch (...) {
        encode_failure = std::current_exception();
      }
    });
  };
  // Hands each split's text up to its last safe cut to a task once it passes chunk_bytes.
  auto cut_tasks = [&](bool all) {
    for (int s = 0; s < 2; ++s) {
      std::string& text = splits[s].pending;
      if (text.empty() || (!all && text.size() < opts.chunk_bytes)) continue;
      const size_t cut = all ? text.size() : Tokenizer::safe_cut_before(text, text.size() - 1);
      if (cut == 0) continue;  // no safe point yet: keep reading
      reading.push_back(Task{s, text.substr(0, cut), {}});
      text.erase(0, cut);
    }
  };
  // Enough tasks per batch that the threads finish together (tasks differ in length), while the
  // next batch is read.
  const size_t batch_tasks = 4 * opts.threads;
  try {
    std::vector<char> buf(size_t(1) << 20);
    for (const std::string& path : files) {
      gzFile gz = gzopen(path.c_str(), "rb");
      if (gz == nullptr) throw Error("cannot open input '" + path + "': " + std::strerror(errno));
      gzbuffer(gz, 1 << 18);
      size_t file_in = 0;
      for (;;) {
        const int n = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()));
        if (n < 0) {
          int code = 0;
          const std::string msg = gzerror(gz, &code);
          gzclose(gz);
          throw Error("reading input '" + path + "' failed: " + msg +
                      " (a corrupt or truncated .gz?)");
        }
        if (n == 0) break;
        reader.feed(buf.data(), static_cast<size_t>(n));
        sum.text_bytes += static_cast<size_t>(n);
        const size_t off = static_cast<size_t>(std::max<z_off_t>(0, gzoffset(gz)));
        input_done += off - file_in;
        file_in = off;
        cut_tasks(false);
        if (reading.size() >= batch_tasks) start_batch();
        report(false);
      }
      // A stream that ends early (a truncated .gz) reads as a short file; zlib says so here.
      int code = Z_OK;
      const std::string msg = gzerror(gz, &code);
      const int closed = gzclose(gz);
      if (code != Z_OK || closed != Z_OK)
        throw Error("reading input '" + path + "' failed: " +
                    (code != Z_OK ? msg : std::string("zlib error ") + std::to_string(closed)) +
                    " (a corrupt or truncated .gz?)");
      reader.end_file();
    }
    cut_tasks(true);
    start_batch();
    finish_batch();
    sum.train_documents = splits[0].documents;
    sum.val_documents = splits[1].documents;
    if (reader.documents() < 2 || sum.train_documents == 0 || sum.val_documents == 0)
      throw Error("the corpus has " + std::to_string(reader.documents()) +
                  " documents (separated by blank lines); with val_fraction = " +
                  std::to_string(opts.val_fraction) + " the " +
                  (sum.val_documents == 0 ? "validation" : "train") +
                  " split is empty: give more documents or another fraction");
    series[0].close();
    series[1].close();
  } catch (...) {
    if (worker.joinable()) worker.join();
    for (const std::string& p : written) fs::remove(p, ec);
    throw;
  }
  report(true);
  sum.train_tokens = series[0].tokens();
  sum.val_tokens = series[1].tokens();
  sum.train_shards = series[0].paths();
  sum.val_shards = series[1].paths();
  return sum;
}

}  // namespace wte
