export { chatCompletion, type ChatCompletionOptions, type ChatCompletionResult } from "./chat-completion";
export {
  chooseCategory,
  parseCategoryAnswer,
  FALLBACK_CATEGORY,
  type CategorisableTransaction,
  type CategoryChoice,
  type ChooseCategoryOptions,
} from "./choose-category";
export { ModelCallError } from "./errors";
export {
  recordModelCall,
  flushModelCallRecords,
  type ModelCallContext,
  type ModelCallOutcome,
  type ModelCallRecord,
} from "./record";
export type { ChatMessage } from "./schemas";
