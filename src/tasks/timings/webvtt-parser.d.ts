/** The W3C WebVTT parser and validator (tests check our WebVTT with it). */
declare module 'webvtt-parser' {
  export interface ParsedCue {
    id: string;
    startTime: number;
    endTime: number;
    text: string;
  }
  export interface ParseError {
    message: string;
    line: number;
  }
  interface WebVTTParser {
    parse(
      input: string,
      mode?: 'subtitles' | 'chapters' | 'metadata',
    ): { cues: ParsedCue[]; errors: ParseError[] };
  }
  const webvtt: { WebVTTParser: new () => WebVTTParser };
  export default webvtt;
}
