/** An expected failure with the HTTP status and the message a person reads. */
export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export interface ErrorBody {
  error: { code: string; message: string; issues?: { path: string; message: string }[] };
}
