// Type declarations for moonlm (Node binding over libmoonlm.so).

/** Status codes of include/moonlm.h. */
export declare const Status: Readonly<{
  OK: 0;
  INVALID_ARGUMENT: 1;
  IO: 2;
  BAD_FILE: 3;
  UNSUPPORTED: 4;
  BUFFER_TOO_SMALL: 5;
  CONTEXT_FULL: 6;
  CANCELLED: 7;
  BUSY: 8;
  OUT_OF_MEMORY: 9;
  INTERNAL: 10;
  FORKED: 11;
}>;

export type StatusCode =
  | 'INVALID_ARGUMENT'
  | 'IO'
  | 'BAD_FILE'
  | 'UNSUPPORTED'
  | 'BUFFER_TOO_SMALL'
  | 'CONTEXT_FULL'
  | 'CANCELLED'
  | 'BUSY'
  | 'OUT_OF_MEMORY'
  | 'INTERNAL'
  | 'FORKED'
  | 'LOAD';

/**
 * A failed moonlm call; `message` is the library's description. A bad
 * argument caught by the binding is an ArgumentError (a TypeError or
 * RangeError) and also counts as `instanceof MoonlmError`.
 */
export declare class MoonlmError extends Error {
  readonly name: 'MoonlmError';
  /** The status name; 'LOAD' when the library itself could not be loaded. */
  readonly code: StatusCode | `STATUS_${number}`;
  /** The moonlm_status number (0 for failures before reaching the library). */
  readonly status: number;
}

/**
 * A bad argument, caught before the library is called: a TypeError for a
 * value of the wrong type or an unknown option name, a RangeError for one out
 * of range (a fraction, NaN, beyond int32, ...). `instanceof MoonlmError` is
 * true for it.
 */
export interface ArgumentError extends Error {
  readonly name: 'TypeError' | 'RangeError';
  readonly code: 'INVALID_ARGUMENT';
  readonly status: 1;
  /** The parameter, e.g. 'token', 'opts.nCtx', 'tokens[3]', 'messages[0].content'. */
  readonly param: string;
}

/** Token ids: integers in [0, 2**31-1]. Strings, Buffers and Uint8Arrays are refused (text is never token ids). */
export type Tokens = Int32Array | ArrayLike<number>;

/** A tri-state setting: omitted, null or 'default' let the library decide (its environment, else on). */
export type Switch = boolean | 'default' | 'on' | 'off' | null;

/**
 * The arithmetic a model computes with. 'default': MOONLM_NUMERICS as it was
 * when the library loaded, else the CPU's fastest kernels. The others
 * reproduce a reference implementation's logits bit for bit, several times
 * slower: 'llamacpp' (llama.cpp's x86 CPU backend with its defaults),
 * 'llamacpp-norepack' (without repacked weights), 'ik' (ik_llama.cpp).
 */
export type Numerics = 'default' | 'llamacpp' | 'llamacpp-norepack' | 'ik';

export interface OpenOptions {
  /** Worker threads for the model's sessions; 0 or omitted = one per core. */
  threads?: number;
  /** Repack weight matrices into the CPU kernels' faster layouts at open; default on unless MOONLM_PACK=0. */
  pack?: Switch;
  /** Keep packed weights in an on-disk cache so the next open maps them; default on unless MOONLM_PACKED_CACHE=0. */
  packedCache?: Switch;
  /** The cache's own folder; default $MOONLM_PACKED_CACHE_DIR, else ~/.cache/moonlm/packed. */
  packedCacheDir?: string | null;
  /** The cache's eviction budget in bytes, in [0, 2**63); 0 or omitted = $MOONLM_PACKED_CACHE_BYTES, else 8 GiB. */
  packedCacheBytes?: number | bigint | null;
  /** The numerics mode; omitted or null = 'default'. Other values are refused (INVALID_ARGUMENT). */
  numerics?: Numerics | null;
  /**
   * Called during the open with the fraction done, in [0, 1], never
   * decreasing, ending with 1; returning false cancels the open (it then
   * rejects with status CANCELLED). If it throws, the open is cancelled and
   * rejects with that error.
   */
  progress?: ((fraction: number) => boolean | void) | null;
}

export interface TokenizeOptions {
  /** Add BOS/EOS as the model's metadata asks (default true). */
  addSpecial?: boolean;
  /** Turn special-token text such as "<|im_end|>" into their ids (default false). */
  parseSpecial?: boolean;
}

export interface SessionOptions {
  /** Context length in tokens; default the model's contextLength. */
  nCtx?: number;
  /** Worker threads; default the model's. */
  threads?: number;
  /** KV cache element type: 'f16' (default, like llama.cpp) or 'f32'. */
  kvType?: 'f16' | 'f32' | 'q8_0';
  /**
   * A hybrid model's checkpoints of its recurrent state (other models ignore
   * these): every how many decoded positions (default 32, negative never),
   * besides one at the end of every prefill.
   */
  checkpointEvery?: number;
  /** The memory the checkpoints may take in bytes (default 128 MiB, negative none at all). */
  checkpointBytes?: number;
}

/** Session.checkpoints(): a hybrid model session's checkpoints (all zero for other models). */
export interface Checkpoints {
  /** Decoded positions between checkpoints in effect (0: none while decoding). */
  every: number;
  /** The most kept at once (0: none). */
  maxCount: number;
  /** The memory the held ones take. */
  bytesHeld: number;
  /** The positions held, ascending; a rewind to one evaluates nothing. */
  positions: number[];
}

export interface SamplerOptions {
  /** Default 0.8; <= 0 is greedy. */
  temperature?: number;
  /** Default 40; <= 0 off. */
  topK?: number;
  /** Default 0.95; >= 1 off. */
  topP?: number;
  /** Default 0.05; <= 0 off. */
  minP?: number;
  /** Default 1 (off). */
  repeatPenalty?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Accepted tokens the penalties look at (default 64). */
  penaltyLastN?: number;
  /** Equal seeds give equal draws; omitted = random. */
  seed?: number | bigint;
  /** Typical sampling mass (default 1: off). */
  typicalP?: number;
  /** XTC: chance per token (default 0: off) of removing every token at least xtcThreshold likely but the least likely. */
  xtcProbability?: number;
  /** Default 0.1; above 0.5 off. */
  xtcThreshold?: number;
  /** 0 (off, default), 1 (v1) or 2 (v2). */
  mirostat?: 0 | 1 | 2;
  /** Target surprise in bits (default 5). */
  mirostatTau?: number;
  /** Learning rate (default 0.1). */
  mirostatEta?: number;
  /** DRY repetition penalty strength (default 0: off). */
  dryMultiplier?: number;
  /** Default 1.75. */
  dryBase?: number;
  /** Repeats this long go unpenalised (default 2; >= 0). */
  dryAllowedLength?: number;
  /** Tokens DRY looks back (default 64; 0 off, -1 all). */
  dryPenaltyLastN?: number;
  /** Strings that end a repeat (default "\n", ":", "\"", "*"; [] for none). */
  drySequenceBreakers?: string[];
  /** Added to a token's logit before sampling: { [token]: bias } or a Map. */
  logitBias?: Record<number, number> | Map<number, number>;
}

/** One token's log-probability in OpenAI's shape. */
export interface TokenLogprob {
  token: string;
  id: number;
  bytes: number[];
  logprob: number;
}

/** Structured output and log-probabilities: options of Model.generate/stream/chat/chatStream. */
export interface OutputOptions {
  /** GBNF text (start rule "root") or a compiled Grammar of this model. */
  grammar?: string | Grammar;
  /** A JSON schema (object or JSON text): the output is a JSON value valid against it. */
  jsonSchema?: object | string;
  /** As OpenAI: { type: 'json_object' } or { type: 'json_schema', json_schema: { schema } }. */
  responseFormat?: { type: 'text' | 'json_object' | 'json_schema'; json_schema?: { name?: string; schema: object }; schema?: object };
  /** Fill Completion.logprobs. */
  logprobs?: boolean;
  /** Alternatives per token, 0 to 20 (needs logprobs). */
  topLogprobs?: number;
}

/** Speculative decoding: options of Model.generate/stream/chat/chatStream (draft: a Model) and Session.stream (draft: a Session). */
export interface DraftOptions<D> {
  /**
   * 'lookup' guesses tokens by prompt lookup (what followed the latest
   * earlier occurrence of the text's last few tokens); a draft model of
   * the same vocabulary guesses greedily. The model checks the guesses in
   * one batched pass; the tokens follow its own distribution as without.
   */
  draft?: 'lookup' | D;
  /** Guesses per pass, 1 to 64 (default 8; needs draft). */
  draftTokens?: number;
}

/** Why a generation ended. */
export type FinishReason = 'stop' | 'length' | 'eog' | 'context' | 'cancelled';

/** What a generation produced: generate/chat with `details: true`, a stream's `completion`. */
export interface Completion {
  /** The generated text (cut before a stop string). */
  text: string;
  /**
   * 'stop' (a stop string), 'length' (maxTokens), 'eog' (the model's
   * end-of-generation token), 'context' (the context is full) or
   * 'cancelled' (Session.cancel(), or an abort: then on the error).
   */
  finishReason: FinishReason;
  /** The generated token ids (an end-of-generation token is not one). */
  tokens: Int32Array;
  /** Tokens evaluated as the prompt. */
  promptTokens: number;
  /** Tokens generated (tokens.length). */
  completionTokens: number;
  /** chat with tools: the calls the reply makes (else null). */
  toolCalls: ParsedToolCall[] | null;
  /** chat with tools: the reply without the calls (else null). */
  content: string | null;
  /** chat with tools: why text that looked like a call could not be read (else null). */
  toolCallError: string | null;
  /** chat: the reply's reasoning (gpt-oss's analysis channel, a <think> block), else null; content is then the answer without it. */
  reasoning: string | null;
  /** With opts.draft: the tokens guessed, and how many were kept (0 without). */
  drafted: number;
  draftAccepted: number;
  /** With opts.logprobs: each generated token's log-probability and its top alternatives (the model's distribution after grammar, bias and penalties, before truncation and temperature). */
  logprobs?: { content: Array<TokenLogprob & { topLogprobs: TokenLogprob[] }> };
}

/** The pieces of a generation; `completion` is set once it is exhausted (also its return value). */
export interface TextStream extends AsyncGenerator<string, Completion | undefined, undefined> {
  readonly completion: Completion | null;
}

/** A MoonlmError with code 'CANCELLED' from a generation carries what was generated until then. */
export interface CancelledGenerationError extends MoonlmError {
  completion?: Completion;
}

export interface StreamOptions extends SamplerOptions {
  /** Tokens to generate at most (default 256; 0 only evaluates the prompt). */
  maxTokens?: number;
  /** Stop before the first occurrence of any of these (not included in the text). */
  stop?: string | string[];
  /** Aborting cancels the running computation; the call rejects with MoonlmError CANCELLED. */
  signal?: AbortSignal;
  /** For a text prompt: add BOS (default true). */
  addSpecial?: boolean;
  /** For a text prompt: parse special-token text (default false). */
  parseSpecial?: boolean;
  /** Context of the session used; default prompt length + maxTokens (capped at contextLength). */
  nCtx?: number;
}

export interface GenerateStreamOptions extends StreamOptions, OutputOptions, DraftOptions<Model> {
  /** Control tokens in the text as their text (e.g. <|channel|>); chat turns it on for harmony templates. */
  keepSpecial?: boolean;
}

export interface GenerateOptions extends GenerateStreamOptions {
  /** Resolve to a Completion instead of the text. */
  details?: boolean;
}

export interface SessionStreamOptions extends Omit<StreamOptions, 'addSpecial' | 'parseSpecial' | 'nCtx'>, OutputOptions, DraftOptions<Session> {
  /** Use (and keep open) this sampler instead of a new one. */
  sampler?: Sampler;
}

/** A tool call in OpenAI's shape. */
export interface ToolCall {
  id?: string;
  type?: 'function';
  function: {
    name: string;
    /** A JSON text of an object (an object is accepted in messages too). */
    arguments: string | Record<string, unknown>;
  };
}

/**
 * How embed() pools a text's per-token hidden states: 'model' (the file's
 * pooling_type, else 'mean'), 'mean', 'cls' (first token), 'last' (last
 * token, as Qwen3-Embedding), 'none' (every token's) or 'rank' (a
 * reranker's classifier head).
 */
export type Pooling = 'model' | 'none' | 'mean' | 'cls' | 'last' | 'rank';

export interface EmbedOptions {
  pooling?: Pooling | null;
  /** Scale each vector to unit length. */
  normalize?: boolean;
}

/** A tool call as parseToolCalls and a Completion report it. */
export interface ParsedToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** An OpenAI-style function spec. */
export interface Tool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** An OpenAI-style chat message; any other key is refused. */
export interface ChatMessage {
  role: string;
  /** Required unless tool_calls is given; null renders as an empty content. */
  content?: string | null;
  /** An assistant message's calls. */
  tool_calls?: ToolCall[];
  /** A tool result ('tool' role): the call it answers. */
  tool_call_id?: string;
  /** A tool result: the tool's name. */
  name?: string;
}

/** Model.parseToolCalls(): a reply split into its calls and the rest. */
export interface ParsedToolCalls {
  format: 'hermes' | 'llama3' | 'mistral' | 'gemma' | 'phi4' | 'harmony' | 'qwen3coder' | 'gemma4';
  content: string;
  tool_calls: ParsedToolCall[];
  /** Why text that looked like a call could not be read (then tool_calls is empty). */
  error?: string;
}

/** A built-in chat format's name, as builtinChatTemplates() lists them. */
export type BuiltinChatTemplate = 'chatml' | 'gemma' | 'llama2' | 'llama3' | 'mistral' | 'phi3' | 'zephyr';

export interface ChatTemplateOptions {
  /** End with the opening of the assistant's reply (default true). */
  addAssistant?: boolean;
  /** A built-in format to use instead of the model's template (required for a model without one). */
  template?: BuiltinChatTemplate | null;
  /** Functions the model may call. */
  tools?: Tool[] | null;
}

export interface ChatStreamOptions extends Omit<StreamOptions, 'addSpecial' | 'parseSpecial'>, OutputOptions, DraftOptions<Model> {
  /** Control tokens in the text as their text; on by default for harmony (gpt-oss) templates. */
  keepSpecial?: boolean;
  /** A built-in format to use instead of the model's template (required for a model without one). */
  template?: BuiltinChatTemplate | null;
  /** Functions the model may call; the completion reports the calls (toolCalls). */
  tools?: Tool[] | null;
  /**
   * With tools: 'auto' (default); 'none' (tools left out of the prompt, no
   * calls read); 'required' (the reply is one call of one of the tools,
   * arguments valid against its schema) or a named tool (one call of it).
   * required/named need a template writing calls the Hermes way (<tool_call> JSON).
   */
  toolChoice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };
  /** true: a forced reply may make several calls; false: one call (a free reply's first); default: forced one call, every free call. */
  parallelToolCalls?: boolean;
}

export interface ChatOptions extends ChatStreamOptions {
  /** Resolve to a Completion instead of the text. */
  details?: boolean;
}

/** Model.openStats(): how a model was opened (times in milliseconds). */
export interface OpenStats {
  /** Where the packed weights came from; 'none': no matrix has a packed layout on this CPU. */
  packSource: 'off' | 'none' | 'packed' | 'packed+cache-write' | 'cache-hit';
  packedMatrices: number;
  packedBytes: number;
  mapMs: number;
  parseMs: number;
  tensorsMs: number;
  packMs: number;
}

export declare class Model implements Disposable {
  private constructor();
  /** Opens a GGUF model on a worker thread. */
  static open(path: string, opts?: OpenOptions): Promise<Model>;
  /**
   * Downloads a GGUF file of a Hugging Face Hub repository into the Hub
   * cache (unless it is there) and opens it; see pull for pattern.
   */
  static fromPretrained(repo: string, pattern?: string | null, opts?: PullOptions & OpenOptions): Promise<Model>;
  /** Releases the model (idempotent); open sessions keep working. */
  close(): void;
  [Symbol.dispose](): void;
  readonly closed: boolean;
  readonly path: string;
  /** The numerics mode asked for at open. */
  readonly numerics: Numerics;
  readonly architecture: string;
  /** The Jinja chat template, or null if the model has none. */
  readonly chatTemplate: string | null;
  readonly vocabSize: number;
  /** The context length the model was trained with. */
  readonly contextLength: number;
  readonly embeddingSize: number;
  readonly nLayers: number;
  readonly nHeads: number;
  readonly nKvHeads: number;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  readonly eotTokenId: number | null;
  isEog(token: number): boolean;
  /** How the model was opened; UNSUPPORTED with a library older than moonlm_model_open_stats. */
  openStats(): OpenStats;
  tokenize(text: string, opts?: TokenizeOptions): Int32Array;
  detokenize(tokens: Tokens): string;
  /** Raw bytes of one token (may be part of a UTF-8 character). */
  tokenToPiece(token: number): Buffer;
  /**
   * Renders messages with the model's chat template, or with `template` (a
   * name from builtinChatTemplates()) in that built-in format. A model
   * without a template rejects with UNSUPPORTED unless `template` is given.
   */
  applyChatTemplate(messages: ChatMessage[], opts?: ChatTemplateOptions): string;
  /** The tool calls in a reply, read as the model's template (or opts.template) writes them. */
  parseToolCalls(text: string, opts?: { template?: BuiltinChatTemplate | null }): ParsedToolCalls;
  /**
   * Embedding vectors: one Float32Array per text (one for a single string),
   * or with pooling 'none' an array of per-token Float32Arrays per text.
   */
  embed(texts: string, opts?: EmbedOptions & { pooling?: Exclude<Pooling, 'none'> }): Float32Array;
  embed(texts: string[], opts?: EmbedOptions & { pooling?: Exclude<Pooling, 'none'> }): Float32Array[];
  embed(texts: string[], opts: EmbedOptions & { pooling: 'none' }): Float32Array[][];
  /** embed() of token lists (each not empty). */
  embedTokens(tokenLists: Tokens[], opts?: EmbedOptions & { pooling?: Exclude<Pooling, 'none'> }): Float32Array[];
  embedTokens(tokenLists: Tokens[], opts: EmbedOptions & { pooling: 'none' }): Float32Array[][];
  /** The length of one embedding vector with pooling (default the model's). */
  embeddingLength(pooling?: Pooling | null): number;
  /** A reranker's relevance score per document (higher is more relevant). */
  rerank(query: string, documents: string[]): number[];
  session(opts?: SessionOptions): Session;
  generate(prompt: string | Tokens, opts: GenerateOptions & { details: true }): Promise<Completion>;
  generate(prompt: string | Tokens, opts?: GenerateOptions & { details?: false }): Promise<string>;
  stream(prompt: string | Tokens, opts?: GenerateStreamOptions): TextStream;
  chat(messages: ChatMessage[], opts: ChatOptions & { details: true }): Promise<Completion>;
  chat(messages: ChatMessage[], opts?: ChatOptions & { details?: false }): Promise<string>;
  chatStream(messages: ChatMessage[], opts?: ChatStreamOptions): TextStream;
}

export declare class Session implements Disposable {
  constructor(model: Model, opts?: SessionOptions);
  readonly model: Model;
  readonly nCtx: number;
  readonly nVocab: number;
  readonly kvType: 'f16' | 'f32' | 'q8_0';
  /**
   * The logits of the last prefill/decode, refilled by every call (a copy of
   * the private buffer the library writes into; replaced if detached).
   */
  readonly logits: Float32Array;
  readonly closed: boolean;
  /** Tokens evaluated so far. */
  readonly position: number;
  /** Evaluates tokens (a copy is taken at the call); resolves to `logits`. */
  prefill(tokens: Tokens): Promise<Float32Array>;
  /** Evaluates one token; resolves to `logits`. */
  decode(token: number): Promise<Float32Array>;
  rewind(nKeep: number): void;
  /** Makes the running or next prefill/decode/stream reject with CANCELLED. */
  cancel(): void;
  /**
   * Streams a continuation from the current position; the last generated
   * token is not evaluated (pass it first to continue). Busy until done.
   */
  stream(tokens: Tokens, opts?: SessionStreamOptions): TextStream;
  close(): void;
  [Symbol.dispose](): void;
}

/** A grammar compiled for one model's vocabulary; reusable across its generations (one at a time). */
export declare class Grammar {
  /** Parses GBNF; a parse error throws MoonlmError INVALID_ARGUMENT naming line:col. */
  constructor(model: Model, gbnf: string);
  /** The JSON values valid against schema. */
  static fromJsonSchema(model: Model, schema: object | string): Grammar;
  /** One call of one of tools (only toolName if given) in the template's (Hermes) syntax. */
  static forToolCalls(model: Model, tools: Tool[], opts?: { toolName?: string; template?: BuiltinChatTemplate; parallel?: boolean }): Grammar;
  readonly model: Model;
  readonly closed: boolean;
  close(): void;
}

export declare class Sampler implements Disposable {
  constructor(opts?: SamplerOptions);
  /** A token chosen from logits (not accepted). */
  sample(logits: Float32Array | ArrayLike<number>): number;
  accept(token: number): void;
  reset(): void;
  close(): void;
  [Symbol.dispose](): void;
}

/** Options of pull and Model.fromPretrained. */
export interface PullOptions {
  /** Branch, tag or commit (default 'main'). */
  revision?: string;
  /** The Hub cache (default HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). */
  cacheDir?: string;
  /** Sent to the Hub, never to its CDN (default HF_TOKEN, else HF_HOME/token). */
  token?: string;
  /** The Hub's address (default HF_ENDPOINT, else https://huggingface.co). */
  endpoint?: string;
  /** Use the cache only (default HF_HUB_OFFLINE). */
  offline?: boolean;
  /** true (default): progress on stderr; false: none; or called as bytes arrive (total -1 if unknown). */
  progress?: boolean | ((file: string, done: number, total: number) => void);
}

/** The Hub refused or could not serve a file. */
export declare class HubError extends Error {
  /** The HTTP status, 0 if there was none. */
  readonly status: number;
}

/**
 * The local path of a GGUF file of a Hugging Face Hub repository,
 * downloaded into the Hub cache unless it is there (resuming, sha256
 * checked). pattern: a file name, a glob ('*Q4_K_M.gguf') or a quantization
 * its name contains ('q8_0'); none: the only GGUF file, or the Q4_K_M one.
 */
export declare function pull(repo: string, pattern?: string | null, opts?: PullOptions): Promise<string>;

export declare function libraryPath(): string;
export declare function libraryVersion(): string;
/** The built-in chat formats `template` accepts, sorted. */
export declare function builtinChatTemplates(): BuiltinChatTemplate[];

/** Session counters (moonlm_session_stats). */
export interface SessionStats {
  /** Positions held. */
  nPos: number;
  nCtx: number;
  /** Tokens run through the model since the session was made or its state loaded. */
  nEvaluated: number;
  /** Tokens prefillReuse found held and did not evaluate. */
  nReused: number;
}

// Session state (state.js), merged into the Session class.
export declare interface Session {
  /**
   * Makes the session hold exactly tokens, evaluating only what it does not
   * already hold; resolves to the last logits (the last token is always
   * evaluated for them). lastEvaluated: how many tokens were evaluated.
   */
  prefillReuse(tokens: Tokens): Promise<Float32Array>;
  /** With { logits: false } no logits are wanted: held tokens are not evaluated again; resolves to null. */
  prefillReuse(tokens: Tokens, opts: { logits: false }): Promise<null>;
  prefillReuse(tokens: Tokens, opts?: { logits?: boolean }): Promise<Float32Array | null>;
  /** Tokens the last prefillReuse evaluated. */
  readonly lastEvaluated?: number;
  stats(): SessionStats;
  /** The checkpoints of a hybrid model's recurrent state. Synchronous. */
  checkpoints(): Checkpoints;
  /** The tokens held, one per position. */
  readonly tokens: Int32Array;
  /** A new session with a copy of this one's positions (nothing recomputed). */
  fork(): Session;
  /** The state as a Buffer, or written to path (then undefined). Synchronous. */
  saveState(): Buffer;
  saveState(path: string | URL): undefined;
  /** Replaces the positions with a saved state (bytes or a file path). Synchronous. */
  loadState(state: Uint8Array | string | URL): void;
}

export interface ConversationOptions {
  messages?: ChatMessage[];
  system?: string;
  /** A built-in chat format instead of the model's template. */
  template?: BuiltinChatTemplate | string;
  nCtx?: number;
  threads?: number;
  kvType?: 'f16' | 'f32' | 'q8_0';
}

export interface ReplyOptions extends SamplerOptions {
  maxTokens?: number;
  stop?: string | string[];
  signal?: AbortSignal;
}

export interface SendOptions extends ReplyOptions {
  /** The new message's role; default 'user'. */
  role?: string;
}

/**
 * A chat that keeps its messages and a session holding their tokens: each
 * turn evaluates only the tokens the session does not already hold.
 */
export declare class Conversation implements Disposable {
  constructor(model: Model, opts?: ConversationOptions);
  readonly model: Model;
  readonly session: Session;
  messages: ChatMessage[];
  /** Tokens the last turn evaluated, and the length of its prompt. */
  lastEvaluated: number;
  lastPromptTokens: number;
  add(role: string, content: string): void;
  promptTokens(): Int32Array;
  send(content: string, opts?: SendOptions): Promise<string>;
  sendStream(content: string, opts?: SendOptions): AsyncGenerator<string, void, undefined>;
  reply(opts?: ReplyOptions): Promise<string>;
  replyStream(opts?: ReplyOptions): AsyncGenerator<string, void, undefined>;
  /** A copy going on independently: messages copied, session forked. */
  fork(): Conversation;
  close(): void;
  [Symbol.dispose](): void;
}

declare const moonlm: {
  Model: typeof Model;
  Session: typeof Session;
  Sampler: typeof Sampler;
  MoonlmError: typeof MoonlmError;
  Status: typeof Status;
  libraryPath: typeof libraryPath;
  libraryVersion: typeof libraryVersion;
  builtinChatTemplates: typeof builtinChatTemplates;
  pull: typeof pull;
  HubError: typeof HubError;
  Conversation: typeof Conversation;
};
export default moonlm;

/** Options of a decodeBatch entry or a Batcher.decode call. */
export interface BatchEntryOptions {
  /**
   * The tokens are a chunk of a prompt that the session's next entry goes
   * on with: a hybrid model's session takes the checkpoints of one prefill
   * of the whole prompt instead of one per chunk (default false).
   */
  continues?: boolean;
}

/**
 * Evaluates every [session, tokens] entry (one token, or an array such as a
 * chunk of a prompt; a third element gives its options) in one forward
 * pass; each session's logits then hold its last token's logits, bit for
 * bit what it gets alone. Resolves to one error per entry, null where the
 * tokens were evaluated.
 */
export function decodeBatch(
  model: Model,
  entries: Array<[Session, number | ArrayLike<number>] | [Session, number | ArrayLike<number>, BatchEntryOptions]>,
): Promise<Array<MoonlmError | null>>;

/** The most tokens one decodeBatch step evaluates, over all its entries. */
export function maxBatchTokens(model: Model): number;

/**
 * Lets many async callers share batched steps: decode() queues a session's
 * tokens and resolves with a copy of its logits once the shared step that
 * evaluated them ran. A prompt longer than a step is fed in chunks marked
 * continues.
 */
export class Batcher {
  constructor(model: Model);
  readonly model: Model;
  readonly maxTokens: number;
  /** The batched steps run so far. */
  readonly steps: number;
  decode(session: Session, tokens: number | ArrayLike<number>, opts?: BatchEntryOptions): Promise<Float32Array>;
}
