/**
 * The look the operations charts share, so they read as one family: a faint horizontal grid,
 * muted axes and a legend of squares under the plot.
 */
export const GRID = { strokeDasharray: "3 3", vertical: false, stroke: "#e5e8ee" } as const;
export const AXIS = { tick: { fontSize: 12, fill: "#5b6270" }, stroke: "#c5ccd8" } as const;
export const LEGEND = {
  verticalAlign: "bottom",
  height: 28,
  iconType: "square",
  wrapperStyle: { fontSize: 13 },
} as const;
/** A vertical axis title, written along the axis. */
export const axisTitle = (value: string) =>
  ({ value, angle: -90, position: "insideLeft", fill: "#5b6270", fontSize: 12 }) as const;
