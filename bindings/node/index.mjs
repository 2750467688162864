// ES module entry: the CommonJS implementation, re-exported by name.
import moonlm from './index.js';

export const {
  Model,
  Session,
  Sampler,
  Grammar,
  MoonlmError,
  Status,
  libraryPath,
  libraryVersion,
  builtinChatTemplates,
  pull,
  HubError,
  Conversation,
  decodeBatch,
  maxBatchTokens,
  Batcher,
} = moonlm;
export default moonlm;
